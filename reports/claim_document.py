"""A claim as data: a versioned JSON document another tool can read, and that re-runs the claim.

The document says what the claim is apart from any model: its statement, its controls, and for each
evidence item the statistic (an equation), where it measures, what it changes there, its bar with the
reason, whether it decides, and which controls it is computed on. It is built from the claim's declaration
(``Hypothesis.items``, the records its run measures), so it cannot drift from what runs:

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

from contextlib import contextmanager
from dataclasses import replace

from ..hypotheses.base import REGISTRY, Hypothesis, Threshold
from ..hypotheses.declaration import Item, fill
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


def item_document(i: Item, fields: dict) -> dict:
    """One declared item as the document states it, its texts filled with ``fields``."""
    t = i.threshold
    return {
        "name": i.name,
        "kind": i.kind.value,
        "required": i.required,
        "statistic": fill(i.definition, fields),
        "site": fill(i.site, fields),
        "intervention": fill(i.intervention, fields),
        "threshold": {"value": t.value, "direction": t.direction, "bound": t.bound, "reason": t.reason},
        "controls": sorted(i.controls),
    }


def claim_document(cid: str, *, n: int = 2000, components=None) -> dict:
    """The document of the registered claim ``cid`` for evaluation pools of ``n``, its sites named at
    ``components`` (``model.components.Components``; default the paper's). KeyError for an unknown id."""
    from ..model.components import PAPER

    if cid not in REGISTRY:
        raise KeyError(f"unknown claim id {cid!r}; known: {', '.join(REGISTRY)}")
    cls = REGISTRY[cid]
    fields = cls.fields(components or PAPER, n)
    return {
        "schema": DOCUMENT_SCHEMA,
        "claim": cls.id,
        "spec": cls.spec,
        "statement": cls.statement,
        "pool_size": n,
        "controls": dict(sorted(cls.controls.items())),
        "decision_rule": DECISION_RULE,
        "items": [item_document(i, fields) for i in cls.items],
    }


def claim_documents(ids: list[str], *, n: int = 2000, components=None) -> dict[str, dict | None]:
    """{claim: its document} for the registered claims ``ids``; None for a claim that declares no items
    (one that computes its own)."""
    return {cid: claim_document(cid, n=n, components=components) if REGISTRY[cid].items else None for cid in ids}


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
    items = []
    for i in base.items:  # what the code measures, with the document's bar and required flag
        d = given[i.name]
        bar = Threshold(float(d["threshold"]["value"]), d["threshold"]["direction"], d["threshold"]["reason"])
        items.append(replace(i, threshold=bar, required=d["required"]))
    return type(f"Documented_{base.__name__}", (base,), {"items": tuple(items)})


@contextmanager
def running(doc: dict | None, path: str, only: list[str] | None, n: int | None):
    """Run under the ``--claim-doc`` document ``doc`` (read from ``path``; None: no document): yields
    ``(only, n, documents)`` for the run, with the document's claim in the registry's place until the
    block ends (forked workers inherit it). Raises ``DocumentError`` (its one line names the file) for a
    document that cannot re-run, or one ``only`` or ``n`` contradicts."""
    if doc is None:
        yield only, n, {}
        return
    try:
        claim = documented(doc)
    except DocumentError as e:
        raise DocumentError(f"--claim-doc {path}: {e}") from None
    if n is not None and n != doc["pool_size"]:
        raise DocumentError(
            f"--claim-doc {path}: the document states its statistics for pools of {doc['pool_size']}; --n {n} differs"
        )
    if only is not None and only != [claim.id]:
        raise DocumentError(f"--claim-doc describes {claim.id}; --only {','.join(only)} asks for other claims")
    registered = dict(REGISTRY)
    REGISTRY[claim.id] = claim
    try:
        yield [claim.id], doc["pool_size"], {claim.id: doc}
    finally:
        REGISTRY.clear()
        REGISTRY.update(registered)
