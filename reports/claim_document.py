"""A claim as data: a versioned JSON document another tool can read, and that re-runs the claim.

The document says what the claim is apart from any model: its statement, its controls, and for each
evidence item the statistic (an equation), where it measures, what it changes there, its bar with the
reason, whether it decides, and which controls it is computed on. It is built from the claim's own code
(``declared_items``: the items as declared, nothing measured), so it cannot drift from what runs:

    >>> doc = claim_document("identity_qk")            # assignadd-verify --explain identity_qk
    >>> doc["items"][2]["threshold"]
    {'value': 0.8, 'direction': '>=', 'bound': 'lower', 'reason': '...'}

Read back (``documented``), it re-runs the claim: what each item measures comes from the code, which
must still declare the same items with the same statistics, kinds and controls (a document that
changes what is measured is refused: the code is what measures); the bars and which items decide come
from the document, so a reader can pre-register other bars and see the verdict under them. The
document of an unchanged claim re-runs to the same verdict. Schema: ``reports/schemas/claim.schema.json``.
"""

from __future__ import annotations

from ..hypotheses.base import REGISTRY, Context, Evidence, Hypothesis, Threshold, declared_items
from .schema import errors

DOCUMENT_SCHEMA = "assignadd.claim-doc/1"
DECISION_RULE = (
    "pass: every required item's conservative bound (lower for >=, upper for <=) clears its bar and the "
    "item fails on each of its controls, at least one required item is causal, and every control that "
    "is an edit changed what it targets; fail: a required item's interval lies wholly on the wrong side "
    "of its bar, or an item passes on a control; inconclusive: an interval straddles a bar; error: no "
    "required causal item, or a required item or a control without data or without effect"
)


class DocumentError(ValueError):
    """A claim document that cannot re-run its claim (one line, for the command line)."""


def _describe_context(n: int, components=None) -> Context:
    from ..data import Task
    from ..hypotheses.locate import given
    from ..model import AssignAddTransformer, ModelConfig
    from ..model.components import PAPER

    # The items are declared, not measured: any model of the task's shape serves. Pools of ``n`` are
    # drawn because some statistics are stated for the pool size they run on. The sites are named at
    # ``components`` (where the claims ran; default the paper's), so nothing is searched here.
    ctx = Context(AssignAddTransformer(ModelConfig(), seed=0), Task(), n=n)
    ctx.pin(given(components or PAPER))
    return ctx


def item_document(e: Evidence) -> dict:
    return {
        "name": e.name,
        "kind": e.kind,
        "required": e.required,
        "statistic": e.definition,
        "site": e.site,
        "intervention": e.intervention,
        "threshold": {
            "value": e.threshold.value,
            "direction": e.threshold.direction,
            "bound": e.threshold.bound,
            "reason": e.threshold.reason,
        },
        "controls": sorted(e.controls),
    }


def claim_document(cid: str, *, n: int = 2000, ctx: Context | None = None) -> dict:
    """The document of the registered claim ``cid`` for evaluation pools of ``n`` (KeyError for an
    unknown id)."""
    if cid not in REGISTRY:
        raise KeyError(f"unknown claim id {cid!r}; known: {', '.join(REGISTRY)}")
    cls = REGISTRY[cid]
    items = declared_items(cls(), ctx or _describe_context(n))
    return {
        "schema": DOCUMENT_SCHEMA,
        "claim": cls.id,
        "spec": cls.spec,
        "statement": cls.statement,
        "pool_size": n,
        "controls": dict(sorted(cls.controls.items())),
        "decision_rule": DECISION_RULE,
        "items": [item_document(e) for e in items],
    }


def claim_documents(ids: list[str], *, n: int = 2000, components=None) -> dict[str, dict | None]:
    """{claim: its document} for the registered claims ``ids``, described on one context; None for a
    claim whose items cannot be declared (its code raises: its run is an ``error`` too). ``components``
    (``model.components.Components``): where the claims read, for the declared sites (default the paper's)."""
    ctx = _describe_context(n, components)
    out = {}
    for cid in ids:
        try:
            out[cid] = claim_document(cid, n=n, ctx=ctx)
        except Exception:  # the run reports the exception; the report stays writable
            out[cid] = None
    return out


def _fields(d: dict) -> tuple:
    return d["kind"], d["statistic"], d["site"], d["intervention"], tuple(d["controls"])


def documented(doc: dict) -> type[Hypothesis]:
    """The claim ``doc`` describes, as a ``Hypothesis`` that measures with the registered code and
    decides with the document's bars and required items. Raises ``DocumentError`` for a document that
    does not match its schema or no longer describes what the code measures."""
    problems = errors(doc)
    if problems:
        raise DocumentError(f"not a claim document ({DOCUMENT_SCHEMA}): {problems[0]}")
    cid = doc["claim"]
    if cid not in REGISTRY:
        raise DocumentError(f"the document's claim {cid!r} is not registered; known: {', '.join(REGISTRY)}")
    base = REGISTRY[cid]
    code = {d["name"]: d for d in claim_document(cid, n=doc["pool_size"])["items"]}
    given = {d["name"]: d for d in doc["items"]}
    if len(given) != len(doc["items"]):
        raise DocumentError(f"{cid}: the document names an item twice")
    if set(code) != set(given):
        added, missing = sorted(set(given) - set(code)), sorted(set(code) - set(given))
        raise DocumentError(
            f"{cid}: the code declares other items (not in the code: {added}; not in the document: {missing})"
        )
    for name, d in given.items():
        if _fields(d) != _fields(code[name]):
            raise DocumentError(
                f"{cid}.{name}: the document's statistic, site, intervention, kind or controls differ from the "
                "code's; a document may change bars and which items decide, not what is measured"
            )
    bars = {
        name: (
            Threshold(float(d["threshold"]["value"]), d["threshold"]["direction"], d["threshold"]["reason"]),
            d["required"],
        )
        for name, d in given.items()
    }

    class Documented(base):
        def evidence(self, ctx: Context) -> list[Evidence]:
            items = super().evidence(ctx)
            for e in items:
                e.threshold, e.required = bars[e.name]
            return items

    Documented.__name__ = f"Documented_{base.__name__}"
    return Documented
