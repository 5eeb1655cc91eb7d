"""What a claim is, what evidence is, and how a verdict is reached (SPEC §4).

A ``Hypothesis`` states one claim of the paper and lists its evidence items. An ``Evidence`` item is
one statistic with a confidence interval, a threshold fixed in code with its reason, and the bound
compared (the *lower* bound for ``>=`` thresholds, the *upper* bound for ``<=``: conservative both
ways). Each item is also computed on the claim's controls, where it must fail. A claim passes when
every required item passes on the model under test and fails on every control, and at least one
passing item is causal.

Nothing here knows any particular claim; ``hypotheses/<claim>.py`` files do.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import torch

from ..data import Task
from ..model import AssignAddTransformer

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
class Threshold:
    """A pre-registered bar: ``bound(statistic) >= value`` (or ``<=``), with why this value."""

    value: float
    direction: str  # ">=" or "<="
    reason: str

    def __post_init__(self):
        if self.direction not in (">=", "<="):
            raise ValueError(f"direction must be '>=' or '<=', got {self.direction!r}")

    def passes(self, low: float | None, high: float | None) -> bool:
        if low is None or high is None:
            return False
        return low >= self.value if self.direction == ">=" else high <= self.value

    def status(self, low: float | None, high: float | None) -> str:
        """ "pass" (the conservative bound clears the bar), "fail" (the whole interval is on the wrong
        side), "inconclusive" (the interval straddles the bar) or "no data"."""
        if low is None or high is None:
            return "no data"
        if self.passes(low, high):
            return "pass"
        wrong_side = high < self.value if self.direction == ">=" else low > self.value
        return "fail" if wrong_side else "inconclusive"

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

    @property
    def passed(self) -> bool:
        return self.threshold.passes(self.measurement.low, self.measurement.high)

    @property
    def status(self) -> str:
        return self.threshold.status(self.measurement.low, self.measurement.high)

    def control_passed(self, name: str) -> bool:
        m = self.controls[name]
        return self.threshold.passes(m.low, m.high)

    def control_status(self, name: str) -> str:
        m = self.controls[name]
        return self.threshold.status(m.low, m.high)

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


def decide(evidence: list[Evidence]) -> tuple[str, str]:
    """The decision rule shared by every claim (SPEC §4, §5, §6).

    error         no required causal item; a required item with no data; or, when nothing failed, a
                  control of a required item that had no data or was an intervention that changed
                  nothing (a control that did not act is no control, never a point for the claim)
    fail          a required item's interval lies wholly on the wrong side of its bar; or a control
                  passed (the item cannot tell the claim from its control)
    inconclusive  no failure, but a required item's (or a control's) interval straddles its bar
    pass          every required item clears its bar and fails on every control
    """
    required = [e for e in evidence if e.required]
    if not any(e.kind == "causal" for e in required):
        return "error", "no required causal evidence item: observational evidence alone never suffices"
    empty = [e.name for e in required if e.status == "no data"]
    if empty:
        return "error", f"required evidence had no data: {', '.join(empty)}"
    failed = [e.name for e in required if e.status == "fail"]
    if failed:
        return "fail", f"required evidence failed: {', '.join(failed)}"
    idle = []
    for e in required:
        for c, m in sorted(e.controls.items()):
            if m.value is None or not m.n:
                idle.append(f"{c} on {e.name} had no data")
            elif m.acted is not None and not m.acted > ACTED_MIN:
                idle.append(f"{c} on {e.name} changed nothing it targets")
    if idle:
        return "error", "a control did not act, so it cannot count for or against the claim: " + "; ".join(idle)
    leaked = [f"{e.name} on {c}" for e in required for c in e.controls if e.control_status(c) == "pass"]
    if leaked:
        return "fail", f"evidence also passed on a control (it cannot tell the claim apart): {', '.join(leaked)}"
    open_items = []
    for e in required:
        if e.status == "inconclusive":
            more = e.measurement.samples_to_decide(e.threshold)
            hint = f" (about {more} samples might decide it)" if more else ""
            open_items.append(
                f"{e.name} {e.measurement.value:.4g} [{e.measurement.low:.4g}, {e.measurement.high:.4g}] "
                f"straddles {e.threshold.direction} {e.threshold.value}{hint}"
            )
        for c, m in sorted(e.controls.items()):
            if e.control_status(c) == "inconclusive":
                open_items.append(f"{e.name} on control {c} straddles its bar")
    if open_items:
        return "inconclusive", "an interval straddles its threshold: " + "; ".join(open_items)
    return "pass", f"all {len(required)} required items passed and failed on their controls"


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
    """One claim. Subclasses set ``id``, ``spec``, ``statement``, ``controls`` and implement ``evidence``."""

    id: str = ""
    spec: str = ""
    statement: str = ""
    controls: dict[str, str] = {}
    skip_note: str = ""  # a claim about a series or a sweep: what it needs, the reason ``run`` skips it

    def evidence(self, ctx: Context) -> list[Evidence]:
        raise NotImplementedError

    def run(self, ctx: Context) -> ClaimResult:
        if self.skip_note:  # one checkpoint cannot decide it: skipped, with the note saying what it needs
            return ClaimResult(
                self.id, self.spec, self.statement, "skipped", self.skip_note, [], dict(self.controls), ctx.seed
            )

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
        return ClaimResult(
            self.id,
            self.spec,
            self.statement,
            verdict,
            reason,
            items,
            dict(self.controls),
            seed,
            {"seconds": time.perf_counter() - t0},
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
    """Class decorator: add a hypothesis to the registry under its ``id``."""
    if not cls.id:
        raise ValueError(f"{cls.__name__} has no id")
    if cls.id in REGISTRY and REGISTRY[cls.id] is not cls:
        raise ValueError(f"two hypotheses share the id {cls.id!r}")
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


def item(
    name: str,
    *,
    definition: str,
    kind: str,
    threshold: Threshold,
    measure: Callable[..., Measurement],
    on,
    controls: dict | None = None,
    required: bool = True,
    site: str | None = None,
    intervention: str | None = None,
) -> Evidence:
    """Build an evidence item: ``measure(on)`` on the model under test and ``measure(c)`` on each control
    (``controls``: name -> whatever ``measure`` takes: a model, an ``Arm``, a position). ``site`` (the hook
    points it reads or edits) and ``intervention`` (the edit, None for a reading) describe it in the
    claim's document (``hypotheses.document``).

    Everything but the name is a keyword, so a claim's list of items reads without a key::

        item("identity_moves_answer", definition="...", kind="causal", threshold=MOVES,
             measure=moves, on=Arm(ctx.model), controls={"wrong_site": Arm(ctx.model, "wrong_site")})
    """
    if _DESCRIBING.get():  # ``describe``: the item as declared, nothing measured
        measure = _unmeasured
    return Evidence(
        name,
        definition,
        kind,
        threshold,
        measure(on),
        {c: measure(s) for c, s in (controls or {}).items()},
        required,
        site,
        intervention,
    )


_DESCRIBING: ContextVar[bool] = ContextVar("describing", default=False)


def _unmeasured(_on) -> Measurement:
    return Measurement(None, None, None, None)


def declared_items(hypothesis: "Hypothesis", ctx: "Context") -> list[Evidence]:
    """The evidence items ``hypothesis`` declares on ``ctx``, built without measuring any of them (every
    measurement empty): what a claim is, as data, apart from what a model makes of it."""
    token = _DESCRIBING.set(True)
    try:
        with torch.no_grad():
            return hypothesis.evidence(ctx)
    finally:
        _DESCRIBING.reset(token)


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
