"""What a claim is, what evidence is, and how a verdict is reached (SPEC §4).

A ``Hypothesis`` states one claim of the paper and lists its evidence items. An ``Evidence`` item is
one statistic with a confidence interval, a threshold fixed in code with its reason, and the bound
compared (the *lower* bound for ``>=`` thresholds, the *upper* bound for ``<=``: conservative both
ways). Each item is also computed on the claim's controls, where it must fail. A claim passes when
every required item passes on the model under test and fails on every control, and at least one
passing item is causal. Claims about a series or a sweep are decided by the same ``decide`` under their
own ``Policy``, their items read by the same ``IntervalRule`` with their own options.

Nothing here knows any particular claim; ``hypotheses/<claim>.py`` files do.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, NamedTuple

import torch

from ..data import Task
from ..model import AssignAddTransformer
from .declaration import ROLES, DeclarationError, Interface, Item, fill, layout_fields, validate

RESULT_SCHEMA = "assignadd.claim/1"
# A control's edit that moved what it targets by less than this (mean absolute change) did nothing:
# rounding noise of float32 activations of order 1-10 is ~1e-6.
ACTED_MIN = 1e-5
ROUND = 6


def _r(x):
    if x is None:
        return None
    if isinstance(x, float):
        if math.isnan(x):
            return None
        return round(x, ROUND)
    if isinstance(x, dict):
        return {k: _r(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_r(v) for v in x]
    return x


@dataclass(frozen=True)
class IntervalRule:
    """How an interval ``[low, high]`` reads against a bar (``direction value``): the one rule every item of
    every claim is judged by. Its options are what tells one checkpoint, a series and a sweep apart.

    pass          the conservative end clears the bar (``low >= value`` for ``>=``, ``high <= value`` for ``<=``)
    fail          the optimistic end lies past the bar (``high < value`` for ``>=``; ``low > value`` for ``<=``,
                  or ``low >= value`` for a bracket open at ``low``: the true value lies above ``low``), or
                  where ``fails`` is ``"unreached"``, is not shown to reach it; or ``empty`` says so
    inconclusive  the interval straddles the bar (or is unbounded on the side that could still reach it); or
                  ``empty`` says so
    no data       an end is missing and ``missing`` says so (or neither end is there and ``empty`` says so)

    missing   what a missing end (None) is: ``"no data"`` (one checkpoint: the item was not measured), or
              ``"unbounded"`` (a series or a sweep: the interval is open to -inf / +inf on that side)
    empty     the state of an interval with neither end: ``"no data"``, ``"fail"`` (nothing measured places
              it anywhere: a phase with no onset has no place in time), or ``"inconclusive"`` (open both ways:
              a phase the series ends before has its onset after the series' end)
    fails     which optimistic end fails: ``"past"`` (one shown past the bar; a NaN end rules nothing out), or
              ``"unreached"`` (one not shown to reach it; a NaN end, or a NaN bar, counts against the claim)
    tol       how far past the bar an end may lie and still read as on it (grid values written as decimals)
    brackets  whether ``extra["open_low"]`` on a measurement marks its interval as a bracket ``(low, high]``
    """

    missing: str = "no data"
    empty: str = "no data"
    fails: str = "past"
    tol: float = 0.0
    brackets: bool = False

    def __post_init__(self):
        options = {
            "missing": ("no data", "unbounded"),
            "empty": ("no data", "fail", "inconclusive"),
            "fails": ("past", "unreached"),
        }
        for name, allowed in options.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"IntervalRule.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if not self.tol >= 0:
            raise ValueError(f"IntervalRule.tol must be >= 0, got {self.tol!r}")

    def state(self, direction: str, value: float, low: float | None, high: float | None, open_low: bool = False) -> str:
        """``"pass"``, ``"fail"``, ``"inconclusive"`` or ``"no data"`` for ``[low, high]`` (``(low, high]`` when
        ``open_low``) against ``direction value``."""
        if low is None and high is None:
            return self.empty
        if self.missing == "no data" and (low is None or high is None):
            return "no data"
        below, above = (value - self.tol, value + self.tol) if self.tol else (value, value)
        if direction == ">=":
            if low is not None and low >= below:
                return "pass"
            end, reaches, past = high, lambda x: x >= below, lambda x: x < below
        else:
            if high is not None and high <= above:
                return "pass"
            if open_low:
                end, reaches, past = low, lambda x: x < below, lambda x: x >= below
            else:
                end, reaches, past = low, lambda x: x <= above, lambda x: x > above
        if end is None:  # unbounded on the side that could still reach the bar
            return "inconclusive"
        failed = not reaches(end) if self.fails == "unreached" else past(end)
        return "fail" if failed else "inconclusive"

    def of(self, threshold: "Threshold", m: "Measurement") -> str:
        """``state`` of a measurement against a threshold (a bracket where ``brackets`` and ``extra["open_low"]``)."""
        open_low = self.brackets and bool(m.extra.get("open_low"))
        return self.state(threshold.direction, threshold.value, m.low, m.high, open_low)


# One checkpoint: an interval missing an end had no data.
CHECKPOINT_RULE = IntervalRule()


@dataclass(frozen=True)
class Threshold:
    """A pre-registered bar: ``bound(statistic) >= value`` (or ``<=``), with why this value."""

    value: float
    direction: str  # ">=" or "<="
    reason: str

    def __post_init__(self):
        if self.direction not in (">=", "<="):
            raise ValueError(f"direction must be '>=' or '<=', got {self.direction!r}")

    def passes(self, low: float | None, high: float | None) -> bool:
        return self.status(low, high) == "pass"

    def status(self, low: float | None, high: float | None) -> str:
        """The state of ``[low, high]`` against this bar under ``CHECKPOINT_RULE``."""
        return CHECKPOINT_RULE.state(self.direction, self.value, low, high)

    @property
    def bound(self) -> str:
        return "lower" if self.direction == ">=" else "upper"


@dataclass
class Measurement:
    """One statistic with its interval; ``extra`` holds supporting numbers (JSON-able)."""

    value: float | None
    low: float | None
    high: float | None
    n: int | None = None
    extra: dict = field(default_factory=dict)
    # For a control made by an intervention: how much the edit changed what it targets (None: not an
    # intervention, e.g. a re-initialised model). A control whose edit changed nothing is no control.
    acted: float | None = None

    @classmethod
    def exact(cls, value: float, n: int | None = None, **extra) -> "Measurement":
        """A statistic with no sampling error (computed from the weights or over an exhaustive set)."""
        return cls(value, value, value, n, extra)

    def to_dict(self) -> dict:
        d = {"value": self.value, "ci": [self.low, self.high], "n": self.n, "extra": self.extra}
        if self.acted is not None:
            d["acted"] = self.acted
        return _r(d)

    def samples_to_decide(self, threshold: "Threshold") -> int | None:
        """Roughly how many samples would make this interval clear ``threshold`` (its half-width shrinks
        as 1/sqrt(n)), for an interval that straddles it; None when not applicable."""
        if None in (self.value, self.low, self.high) or not self.n:
            return None
        gap = abs(self.value - threshold.value)
        # the side of the interval compared with the bar (lower bound for >=, upper for <=)
        side = self.value - self.low if threshold.direction == ">=" else self.high - self.value
        if gap == 0 or side <= 0:
            return None
        return int(math.ceil(self.n * (side / gap) ** 2))


@dataclass
class Evidence:
    name: str
    definition: str  # what is measured, as an equation
    kind: str  # "observational" or "causal"
    threshold: Threshold
    measurement: Measurement
    controls: dict[str, Measurement] = field(default_factory=dict)
    required: bool = True
    site: str | None = None  # where it measures (hook names); in the claim's document, not in its result
    intervention: str | None = None  # what it changes there (None: it only reads)
    rule: IntervalRule = CHECKPOINT_RULE  # how its intervals read (a series' and a sweep's: their own)

    @property
    def passed(self) -> bool:
        return self.threshold.passes(self.measurement.low, self.measurement.high)

    @property
    def status(self) -> str:
        """The measurement's state under the item's ``rule`` (what ``decide`` reads, and the JSON's)."""
        return self.rule.of(self.threshold, self.measurement)

    def control_passed(self, name: str) -> bool:
        m = self.controls[name]
        return self.threshold.passes(m.low, m.high)

    def control_status(self, name: str) -> str:
        return self.rule.of(self.threshold, self.controls[name])

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "definition": self.definition,
            "kind": self.kind,
            "required": self.required,
            "threshold": {
                "value": _r(self.threshold.value),
                "direction": self.threshold.direction,
                "bound": self.threshold.bound,
                "reason": self.threshold.reason,
            },
            "measurement": self.measurement.to_dict(),
            "passed": self.passed,
            "status": self.status,
            "controls": {
                name: {**m.to_dict(), "passed": self.control_passed(name), "status": self.control_status(name)}
                for name, m in sorted(self.controls.items())
            },
        }


@dataclass
class ClaimResult:
    claim: str
    spec: str
    statement: str
    verdict: str  # "pass", "fail", "inconclusive" or "error" (see ``decide``)
    reason: str
    evidence: list[Evidence]
    controls: dict[str, str]  # control name -> what it is
    seed: int
    timings: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self, timings: bool = False) -> dict:
        d = {
            "schema": RESULT_SCHEMA,
            "claim": self.claim,
            "spec": self.spec,
            "statement": self.statement,
            "verdict": self.verdict,
            "reason": self.reason,
            "seed": self.seed,
            "controls": dict(sorted(self.controls.items())),
            "evidence": [e.to_dict() for e in self.evidence],
        }
        if timings:
            d["timings"] = _r(self.timings)
        return d


@dataclass(frozen=True)
class Policy:
    """What ``decide`` asks of one kind of claim, and how it words what the intervals cannot decide.

    requires       what the evidence must have: ``"causal"`` (a required causal item: one checkpoint),
                   ``"controls"`` (a control on every required item: a series, controlled on its time axis) or
                   ``"nothing"`` (a sweep, itself the intervention); the last two also need a required item
    uncontrolled   for ``"controls"``: the error's first words where a required item has no control
    controls       whether the items' controls are judged (a sweep's items have none)
    idle_controls  whether a control that had no data, or an edit that changed nothing, is an error
    open_item      how an item that straddles its bar is named: ``"numbers"`` (value, interval, bar and the
                   samples that might decide it) or ``"note"`` (its ``extra["unresolved"]``: why it is open)
    open_control   how a control that straddles is named (``{item}``, ``{control}``)
    open_by_item   True: each item's straddling controls follow it, by name; False: they follow every item,
                   in the claim's order
    straddles      the first words of the inconclusive reason; ``denser`` its last: what would decide it
    also           after a failure, the words before the items left open ("": not listed)
    passed         the pass reason (``{n}``: the number of required items)
    """

    requires: str
    straddles: str
    uncontrolled: str = ""
    controls: bool = True
    idle_controls: bool = False
    open_item: str = "note"
    open_control: str = ""
    open_by_item: bool = False
    denser: str = ""
    also: str = ""
    passed: str = "all {n} required items passed and failed on their controls"

    def __post_init__(self):
        if self.requires not in ("causal", "controls", "nothing"):
            raise ValueError(f"Policy.requires must be 'causal', 'controls' or 'nothing', got {self.requires!r}")
        if self.open_item not in ("numbers", "note"):
            raise ValueError(f"Policy.open_item must be 'numbers' or 'note', got {self.open_item!r}")


# One checkpoint (SPEC §4): a causal item, controls that act, and the samples that might decide an open item.
CHECKPOINT_POLICY = Policy(
    requires="causal",
    straddles="an interval straddles its threshold: ",
    idle_controls=True,
    open_item="numbers",
    open_control="{item} on control {control} straddles its bar",
    open_by_item=True,
)


def decide(evidence: list[Evidence], policy: Policy = CHECKPOINT_POLICY) -> tuple[str, str]:
    """The decision rule shared by every claim (SPEC §4, §5, §6). ``policy`` says what the claim must have
    and how the reasons read (``CHECKPOINT_POLICY``; a series: ``learning_phases.SERIES_POLICY``; a sweep:
    ``data_requirements.SWEEP_POLICY``); each item's state is its own ``IntervalRule``'s (``Evidence.rule``).
    In this order:

    error         the evidence lacks what the policy requires; a required item with no data; or, when nothing
                  failed and the policy checks them, a control of a required item that had no data or was an
                  intervention that changed nothing (a control that did not act is no control, never a point
                  for the claim)
    fail          a required item's interval lies wholly on the wrong side of its bar; or a control passed
                  (the item cannot tell the claim from its control)
    inconclusive  no failure, but a required item's (or a control's) interval straddles its bar
    pass          every required item clears its bar and fails on every control
    """
    required = [e for e in evidence if e.required]
    lacking = _lacking(required, policy)
    if lacking:
        return "error", lacking
    empty = [e.name for e in required if e.status == "no data"]
    if empty:
        return "error", f"required evidence had no data: {', '.join(empty)}"
    failed = [e.name for e in required if e.status == "fail"]
    if failed:
        unresolved = [e.name for e in required if e.status == "inconclusive"]
        also = f"{policy.also}{', '.join(unresolved)}" if policy.also and unresolved else ""
        return "fail", f"required evidence failed: {', '.join(failed)}{also}"
    if policy.controls:
        idle = _idle_controls(required) if policy.idle_controls else []
        if idle:
            return "error", "a control did not act, so it cannot count for or against the claim: " + "; ".join(idle)
        leaked = [f"{e.name} on {c}" for e in required for c in e.controls if e.control_status(c) == "pass"]
        if leaked:
            return "fail", f"evidence also passed on a control (it cannot tell the claim apart): {', '.join(leaked)}"
    open_items = _straddling(required, policy)
    if open_items:
        return "inconclusive", policy.straddles + "; ".join(open_items) + policy.denser
    return "pass", policy.passed.format(n=len(required))


def _lacking(required: list[Evidence], policy: Policy) -> str:
    """Why the required items lack what ``policy`` requires ("" when they have it)."""
    if policy.requires == "causal":
        if not any(e.kind == "causal" for e in required):
            return "no required causal evidence item: observational evidence alone never suffices"
        return ""
    if not required:
        return "no required evidence item"
    uncontrolled = [e.name for e in required if not e.controls] if policy.requires == "controls" else []
    return f"{policy.uncontrolled}: {', '.join(uncontrolled)}" if uncontrolled else ""


def _idle_controls(required: list[Evidence]) -> list[str]:
    """The controls of required items that had no data or whose edit changed nothing it targets."""
    idle = []
    for e in required:
        for c, m in sorted(e.controls.items()):
            if m.value is None or not m.n:
                idle.append(f"{c} on {e.name} had no data")
            elif m.acted is not None and not m.acted > ACTED_MIN:
                idle.append(f"{c} on {e.name} changed nothing it targets")
    return idle


def _straddling(required: list[Evidence], policy: Policy) -> list[str]:
    """The required items (and their controls) whose intervals straddle their bars, named as ``policy`` says."""
    items, controls = [], []
    for e in required:
        if e.status == "inconclusive":
            items.append(_open_item(e, policy))
        if policy.controls:
            names = sorted(e.controls) if policy.open_by_item else list(e.controls)
            opened = [
                policy.open_control.format(item=e.name, control=c)
                for c in names
                if e.control_status(c) == "inconclusive"
            ]
            (items if policy.open_by_item else controls).extend(opened)
    return items + controls


def _open_item(e: Evidence, policy: Policy) -> str:
    m = e.measurement
    if policy.open_item == "note":
        return f"{e.name} ({m.extra.get('unresolved', 'interval straddles the threshold')})"
    more = m.samples_to_decide(e.threshold)
    hint = f" (about {more} samples might decide it)" if more else ""
    return f"{e.name} {m.value:.4g} [{m.low:.4g}, {m.high:.4g}] straddles {e.threshold.direction} {e.threshold.value}{hint}"


class Context:
    """What a hypothesis measures on: the model under test, the task, a seed, and cached pools.

    Pools are drawn once per (name, size) and shared across hypotheses. ``n`` is the default pool
    size (SPEC §1.4: 2000). ``pools``: a dict to keep the pools in, shared with other contexts of the
    same task and seed (e.g. every checkpoint of a series). ``components``: where the components sit,
    given by the caller (``model.components.Components``); None searches for them (``located``).
    """

    def __init__(
        self,
        model: AssignAddTransformer,
        task: Task | None = None,
        *,
        seed: int = 0,
        n: int = 2000,
        device: str | torch.device = "cpu",
        pools: dict | None = None,
        components=None,
    ):
        self.model = model.to(device).eval()
        self.task = task or Task()
        if self.task.vocab.size != model.cfg.d_vocab or self.task.vocab.modulus != model.cfg.d_vocab_out:
            raise ValueError(
                f"task vocabulary ({self.task.vocab.size} tokens, modulus {self.task.vocab.modulus}) does not match "
                f"the model ({model.cfg.d_vocab}, {model.cfg.d_vocab_out})"
            )
        self.seed = seed
        self.n = n
        self.device = device
        self._pools: dict = {} if pools is None else pools  # keyed by (name, size), drawn from the seed alone
        self._memo: dict = {}
        self._given = components  # pinned by the caller (``--components``), or None: searched (``located``)

    @property
    def located(self):
        """Where the components sit in the model under test and how each was found
        (``hypotheses.locate.Located``): the pre-registered search, run once per context, or the
        components the caller gave. Raises ``LocateError`` (one line) when a role has no candidate."""
        from .locate import given, locate, search_pools

        def find():
            if self._given is not None:
                return given(self._given, self.model)
            return locate(self.model, *search_pools(self))

        return self.memo("located", find)

    def pin(self, located) -> "Context":
        """Use ``located`` (a ``hypotheses.locate.Located``) as where the components sit, unsearched."""
        self._memo["located"] = located
        return self

    @property
    def components(self):
        """The ``Components`` every claim reads (``located.components``)."""
        return self.located.components

    def pool(self, name: str, size: int | None = None):
        key = (name, size or self.n)
        if key not in self._pools:
            self._pools[key] = self.task.pool(name, key[1], seed=self.seed)
        return self._pools[key]

    def memo(self, key, fn: Callable):
        """Compute once per context: for results several hypotheses share (e.g. a reinitialised model)."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def reinitialised_model(self) -> AssignAddTransformer:
        """The negative control of SPEC §5: same shape, fresh TransformerLens-default weights."""
        return self.memo(
            "reinit", lambda: AssignAddTransformer(self.model.cfg, seed=10_000 + self.seed).to(self.device).eval()
        )


class Hypothesis:
    """One claim, declared (``hypotheses.declaration``): subclasses set the class attributes below and list
    their evidence as ``items``; ``register`` validates the declaration. A claim about a series or a
    sweep, which one checkpoint cannot decide, sets ``needs`` instead and computes its items itself.

    id, spec, statement  the claim, the SPEC section it tests, the claim in one sentence
    controls             control name -> what it is (every control an item uses, and no other)
    items                its evidence items (``Item``), in report order
    owns                 the circuit component it is about (``interventions.mutants.COMPONENTS``), or
                         ``WHOLE_MODEL`` for a claim about the answers, or None (not judged by mutants)
    reads                the roles it reads (``locate``), default all three
    interfaces           where the component it owns writes and the next one reads (``Interface``)
    figures              the report's figures that illustrate it, by key (``reports.figures``)
    cost                 CPU seconds at n = 2000 on one thread: the order in which workers take claims
    needs                for a claim one checkpoint cannot decide: (what it needs, the command that runs it),
                         shown where ``assignadd-verify`` lists what it did not run; ``skip_note`` says it
                         in ``run``'s result
    """

    id: str = ""
    spec: str = ""
    statement: str = ""
    controls: dict[str, str] = {}
    items: tuple[Item, ...] = ()
    owns: str | None = None
    reads: tuple[str, ...] = ROLES
    interfaces: tuple[Interface, ...] = ()
    figures: tuple[str, ...] = ()
    cost: float = 1.0
    needs: tuple[str, str] | None = None
    skip_note: str = ""  # why ``run`` skips a claim with ``needs``

    @classmethod
    def text_fields(cls, n: int) -> dict:
        """Template fields beyond the layout's that the items' texts use, for pools of ``n``."""
        return {}

    @classmethod
    def fields(cls, components, n: int) -> dict:
        """Every template field of the items' texts at ``components`` for pools of ``n``."""
        return layout_fields(components) | cls.text_fields(n)

    def evidence(self, ctx: Context) -> list[Evidence]:
        """The declared items measured on ``ctx``: each on the model under test, then on its controls."""
        fields = self.fields(ctx.components, ctx.n)
        out = []
        for i in self.items:
            on_claimed = i.measure(ctx, Arm(ctx.model))
            controls = {
                c: i.measure(ctx, Arm(ctx.reinitialised_model()) if c == "reinitialised" else Arm(ctx.model, c))
                for c in i.controls
            }
            definition, site, intervention = (fill(text, fields) for text in (i.definition, i.site, i.intervention))
            out.append(
                Evidence(
                    i.name, definition, i.kind.value, i.threshold, on_claimed, controls, i.required, site, intervention
                )
            )
        return out

    def run(self, ctx: Context) -> ClaimResult:
        if self.skip_note:  # one checkpoint cannot decide it: skipped, with the note saying what it needs
            return self.result("skipped", self.skip_note, seed=ctx.seed)

        def compute():
            with torch.no_grad():
                items = self.evidence(ctx)
            return (items, *decide(items))

        return self.decided(compute, seed=ctx.seed)

    def decided(self, compute, seed: int = 0) -> ClaimResult:
        """``compute() -> (items, verdict, reason)`` as this claim's ``ClaimResult``, timed. The one place a
        crash becomes a verdict: ``error`` with the exception's line, never a pass."""
        t0 = time.perf_counter()
        try:
            items, verdict, reason = compute()
        except Exception as e:
            items, verdict, reason = [], "error", f"{type(e).__name__}: {e}"
        return self.result(verdict, reason, items, seed, {"seconds": time.perf_counter() - t0})

    def result(self, verdict: str, reason: str, items=(), seed: int = 0, timings: dict | None = None) -> ClaimResult:
        """This claim's ``ClaimResult`` with ``verdict`` and ``reason``."""
        return ClaimResult(
            self.id, self.spec, self.statement, verdict, reason, list(items), dict(self.controls), seed, timings or {}
        )


# Control descriptions several claims share (``Hypothesis.controls``).
REINITIALISED = "a freshly initialised model of the same shape (TransformerLens default init)"
WRONG_SITE_INTERCHANGE = (
    "the same interchange at a distractor assignment's value token, patched from a run in which "
    "that distractor's value changed: an edit that acts where the claim says the answer is "
    "not read, so the answer must not follow it"
)

REGISTRY: dict[str, type[Hypothesis]] = {}


def register(cls: type[Hypothesis]) -> type[Hypothesis]:
    """Class decorator: validate a claim's declaration (``declaration.validate``) and add it to the
    registry under its ``id``; its interfaces take it as their writer."""
    validate(cls)
    if cls.id in REGISTRY and REGISTRY[cls.id] is not cls:
        raise DeclarationError(f"two hypotheses share the id {cls.id!r}")
    cls.interfaces = tuple(replace(i, writer=cls.id) for i in cls.interfaces)
    REGISTRY[cls.id] = cls
    return cls


class Arm(NamedTuple):
    """One arm of a causal item: the model it runs on and which edit it makes, by name.

    ``variant`` is ``CLAIMED`` for the intervention the claim is about (on the model under test, or on
    a control model such as the re-initialised one), else the name of the control edit (``"wrong_site"``,
    ``"other_number"``, ...), so no arm is a positional flag whose meaning changes from file to file."""

    model: object
    variant: str = "claimed"


CLAIMED = "claimed"


def rate(successes: torch.Tensor, acted: float | None = None, **extra) -> Measurement:
    """A success rate with its Clopper-Pearson interval (``acted``: see ``Measurement``)."""
    from ..interventions.statistics import rate_ci

    successes = successes.flatten().bool()
    if successes.numel() == 0:
        return Measurement(None, None, None, 0, {"note": "no examples", **extra}, acted)
    v, lo, hi = rate_ci(successes)
    return Measurement(v, lo, hi, int(successes.numel()), extra, acted)


def mean(
    values: torch.Tensor,
    *,
    seed: int,
    label: str,
    acted: float | None = None,
    bounds: tuple[float, float] | None = None,
    **extra,
) -> Measurement:
    """A mean with its seeded bootstrap interval (``interventions.statistics.mean_ci``; ``bounds``: the
    range the values can take; ``acted``: see ``Measurement``). One value has no interval: no data."""
    from ..interventions.statistics import mean_ci

    values = values.flatten().double()
    if values.numel() == 0:
        return Measurement(None, None, None, 0, {"note": "no examples", **extra}, acted)
    if values.numel() < 2:
        return Measurement(float(values[0]), None, None, 1, {"note": "one example: no interval", **extra}, acted)
    v, lo, hi = mean_ci(values, seed=seed, label=label, bounds=bounds)
    return Measurement(v, lo, hi, int(values.numel()), extra, acted)
