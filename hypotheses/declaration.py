"""What a claim declares, as data: its evidence items and where the rest of the package finds it.

A claim module states everything about its claim in one class (``base.Hypothesis``, whose docstring lists
the fields), its evidence items as ``Item`` records, each with a module-level measure function.
``validate`` checks a declaration when it is registered, before anything is measured (as causal scrubbing
checks its correspondence before sampling): duplicate names, no required causal item, a control an item
uses but the claim does not name (or one the claim names and no item uses), a site that names a hook the
model's layout does not have. The package reads the declaration; nothing recovers it by running the claim.

Sites and definitions are ``string.Template`` texts: ``$PATTERN_1``, ``$layer2`` ... are the located
components' hook names (``layout_fields``), and a claim may add fields computed from the pool size
(``Hypothesis.text_fields``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from string import Template
from typing import Callable

from ..model.components import PAPER, Components

# What ``mutation`` reads: the circuit's components in the order the model computes them
# (``interventions.mutants.COMPONENTS``), and "the whole model" for the claims about answers.
WHOLE_MODEL = "whole model"
ROLES = ("previous_token_head", "fetching_head", "adding_mlp")


class Kind(Enum):
    """What an evidence item does to the model."""

    def __new__(cls, value: str, doc: str):
        member = object.__new__(cls)
        member._value_ = value
        member.__doc__ = doc
        return member

    OBSERVATIONAL = (
        "observational",
        "reads the model as it is (weights, attention patterns, a probe of its activations); never enough "
        "alone: a claim needs a required causal item",
    )
    CAUSAL = (
        "causal",
        "changes an activation or a weight of the model (an ablation, a patch, a swap, a scrub) and reads "
        "what follows where the next component reads it",
    )


@dataclass(frozen=True)
class Item:
    """One evidence item as declared: what it measures, where, with which edit, against which bar.

    ``measure(ctx, arm)`` is a module-level function: ``arm`` is ``Arm(model, variant)``, the model under
    test with ``variant`` "claimed", or one of the item's ``controls``: "reinitialised" is the claimed
    measurement on the context's re-initialised model, any other control the model under test with that
    variant. Measures are called in declaration order, each item's controls after it in their order."""

    name: str
    kind: Kind
    threshold: object  # base.Threshold
    definition: str  # the statistic, as an equation; a template (see the module)
    measure: Callable
    site: str | None = None  # the hook points it reads or edits; a template
    intervention: str | None = None  # the edit it makes there; None for a reading
    controls: tuple[str, ...] = ()
    required: bool = True


@dataclass(frozen=True)
class Interface:
    """Where the output of the component a claim owns is read by the next component (``interfaces``).

    ``writer`` is the declaring claim (filled in when it is registered); ``reader`` the claim about the
    reading component ("" where no claim owns it, e.g. the unembedding)."""

    name: str
    reader: str
    reader_part: str  # the reading component, in words
    output: str  # "layer1_out" (the previous-token head's layer, every position), "attn_out" or "mlp_out" (at `=`)
    fit_per_pool: int  # sequences of each training pool the recoding is fitted on (a draw of their own)
    writer: str = ""

    def hook(self, components: Components) -> str:
        """Where the writer's output is read, at the located components (SPEC §2.1)."""
        return {
            "layer1_out": components.ATTN_OUT_1,
            "attn_out": components.ATTN_OUT_2,
            "mlp_out": components.MLP_OUT_2,
        }[self.output]

    @property
    def where(self) -> str:
        return "at every position" if self.output == "layer1_out" else "at `=`"


LAYOUT_HOOKS = (
    "PATTERN_1",
    "ATTN_OUT_1",
    "RESID_POST_1",
    "RESID_PRE_2",
    "PATTERN_2",
    "KEYS_2",
    "VALUES_2",
    "ATTN_OUT_2",
    "RESID_MID_2",
    "MLP_PRE_2",
    "MLP_OUT_2",
    "layer1",
    "layer2",
    "mlp",
)


def layout_fields(components: Components) -> dict[str, str]:
    """The template fields of a site or definition: each hook name at ``components``."""
    return {name: getattr(components, name) for name in LAYOUT_HOOKS}


def fill(text: str | None, fields: dict) -> str | None:
    """A declared template with its fields filled (None stays None)."""
    return None if text is None else Template(text).substitute(fields)


def _names(text: str | None) -> set[str]:
    if text is None:
        return set()
    return {m.group("named") or m.group("braced") for m in Template.pattern.finditer(text)} - {None}


class DeclarationError(ValueError):
    """A claim's declaration is malformed (raised when it is registered)."""


def validate(cls) -> None:
    """Check the declaration of the claim class ``cls`` (see the module); raises ``DeclarationError``."""
    where = f"claim {cls.id or cls.__name__!r}"
    if not cls.id:
        raise DeclarationError(f"{cls.__name__} has no id")
    if not cls.spec or not cls.statement:
        raise DeclarationError(f"{where}: spec and statement are required")
    for name in cls.reads:
        if name not in ROLES:
            raise DeclarationError(f"{where}: reads unknown role {name!r} (roles: {', '.join(ROLES)})")
    if cls.owns is not None and cls.owns != WHOLE_MODEL:
        from ..interventions.mutants import COMPONENTS

        if cls.owns not in COMPONENTS:
            raise DeclarationError(
                f"{where}: owns unknown component {cls.owns!r} (components: {', '.join(COMPONENTS)})"
            )
    if not cls.items:
        return  # a claim that computes its own items (a series or a sweep claim)
    names = [i.name for i in cls.items]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DeclarationError(f"{where}: item name(s) declared twice: {', '.join(twice)}")
    if not any(i.required and i.kind is Kind.CAUSAL for i in cls.items):
        raise DeclarationError(f"{where}: no required causal item (observational evidence alone never suffices)")
    used = {c for i in cls.items for c in i.controls}
    unnamed = sorted(used - set(cls.controls))
    if unnamed:
        raise DeclarationError(f"{where}: control(s) used by an item but not described: {', '.join(unnamed)}")
    idle = sorted(set(cls.controls) - used)
    if idle:
        raise DeclarationError(f"{where}: control(s) described but used by no item: {', '.join(idle)}")
    known = set(LAYOUT_HOOKS) | set(cls.text_fields(2000))
    for i in cls.items:
        if not isinstance(i.kind, Kind):
            raise DeclarationError(f"{where}.{i.name}: kind must be a Kind, got {i.kind!r}")
        for what in ("site", "definition", "intervention"):
            lacking = sorted(_names(getattr(i, what)) - known)
            if lacking:
                raise DeclarationError(
                    f"{where}.{i.name}: its {what} names ${lacking[0]}, which the model's layout lacks "
                    f"(fields: {', '.join(sorted(known))})"
                )
            fill(getattr(i, what), layout_fields(PAPER) | cls.text_fields(2000))  # a malformed template raises
