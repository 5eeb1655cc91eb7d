"""Mutation testing of the claims: every claim on every component mutant of a checkpoint.

A verdict is about one mechanism only if breaking *that* mechanism fails it and breaking anything
downstream of it does not (SPEC §6). ``mutation_matrix`` runs the registered per-checkpoint claims on
the model and on each mutant of ``interventions.mutants`` and marks each cell against the expected
pattern. For a *break* mutant: the broken component's claim fails, claims upstream of the break pass,
behaviour claims fail, downstream claims are shown but not judged; a claim that does not pass on the
unbroken checkpoint is shown but not judged on any break mutant (a break cannot be seen in a claim
already failing). For a *symmetry* mutant (the same function, other weights): every claim's verdict
is the unbroken checkpoint's, whatever it is, and every cell is judged.

The claims know their components (each declares the one it ``owns``, or ``WHOLE_MODEL`` for a claim about
the answers); the mutants do not. ``build_mutant`` makes the measurements a mutant needs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..data import Task
from ..interventions.mutants import COMPONENTS, MUTANTS, RESIDUAL_STREAM, Mutant, changed_parameters
from ..model.components import PAPER, Components
from .base import REGISTRY, Context, _r
from .declaration import WHOLE_MODEL
from .interfaces import broken_naming, check_all


def expected(claim: str, mutant: Mutant, unbroken: str = "pass") -> str:
    """What a claim's verdict should be on a mutant, given its verdict ``unbroken`` on the checkpoint: the
    expected pattern of the module docstring."""
    if mutant.kind == "symmetry":
        return unbroken
    if unbroken != "pass":
        return "not judged"
    own = REGISTRY[claim].owns if claim in REGISTRY else None
    if own == WHOLE_MODEL:  # a claim about the answers: any break of a component they need fails it
        return "fail"
    if own is None:
        return "not judged"
    i, j = COMPONENTS.index(own), COMPONENTS.index(mutant.component)
    return "fail" if i == j else "pass" if i < j else "not judged"


def build_mutant(name: str, model, seed: int = 0, *, components: Components = PAPER):
    """``MUTANTS[name]`` applied to ``model``'s components at ``components``, with the measurements of
    ``model`` it needs (``Mutant.needs``)."""
    given = {}
    if "directions" in MUTANTS[name].needs:  # the key-frequency directions of the Layer-2 MLP input
        from .measures import fourier

        grid = fourier.grids(model, components=components)
        key = fourier.key_frequencies(model, grid=grid, components=components)
        if not key:
            raise ValueError(f"{name}: the model has no key frequencies, so there is nothing to remove")
        given["directions"] = fourier.frequency_directions(grid[fourier.RESID_MID2], key)  # (k, D)
    return MUTANTS[name](model, seed, components=components, **given)


MATRIX_SCHEMA = "assignadd.mutants/1"


@dataclass
class Cell:
    claim: str
    mutant: str
    verdict: str
    expected: str  # "pass", "fail", "not judged"; on a symmetry mutant the unbroken verdict, whatever it is
    reason: str
    interface: str | None = None  # an interface-broken check naming this claim (hypotheses/interfaces.py)

    @property
    def judged(self) -> bool:
        return self.expected != "not judged"

    @property
    def right(self) -> bool | None:
        """None for a cell that is not judged; else whether the verdict is the expected one. A break the
        claim is expected to fail is also seen when an interface naming the claim is broken: one
        checkpoint cannot tell a writer that recoded its output from a reader that recoded its input."""
        if not self.judged:
            return None
        return self.verdict == self.expected or (self.expected == "fail" and self.interface is not None)


def mutation_matrix(
    model,
    task: Task | None = None,
    *,
    seed: int = 0,
    n: int = 1000,
    mutants=None,
    claims=None,
    progress=None,
    components: Components | None = None,
    jobs: int | None = None,
    judged_only: bool = False,
) -> dict:
    """{"mutants": [...], "claims": [...], "cells": [Cell, ...], "changed": {mutant: [parameter names]},
    "unbroken": {claim: verdict}, "results": {"(unbroken)" or mutant: [ClaimResult, ...]}}.

    ``mutants``: names from ``MUTANTS`` (default all); ``claims``: claim ids (default all registered
    per-checkpoint claims; run in registry order); ``progress``: optional callable(message) for long runs;
    ``components``: where the components sit (default: searched on the unbroken model, SPEC §2.1);
    ``jobs``: worker processes per model (None: one per core); ``judged_only``: on a break mutant, run
    only the claims whose cell is judged (no cell for a claim downstream of the break, or one that does not
    pass unbroken: those are never judged), which saves those runs.

    Each model, the unbroken one first, runs as ``assignadd-verify`` runs a checkpoint
    (``session.run_claims``): its claims side by side, its interface checks beside them where asked for.
    """
    from .session import run_claims

    progress = progress or (lambda message: None)
    names = [m for m in MUTANTS if MUTANTS[m].applies(model) is None] if mutants is None else list(mutants)
    for what, asked, known in (("claim id", claims or [], REGISTRY), ("mutant", names, MUTANTS)):
        unknown = [x for x in asked if x not in known]
        if unknown:
            raise KeyError(f"unknown {what}(s): {', '.join(unknown)}; known: {', '.join(known)}")
    for name in names:
        if (why := MUTANTS[name].applies(model)) is not None:
            raise ValueError(f"{name}: {why}")
    ids = [c for c in REGISTRY if claims is None or c in claims]
    progress("unbroken")
    # The components are found once, on the unbroken model: each mutant breaks that component, and its
    # claims read the same sites (a break may make a search find another head; the claims ask about
    # the one that was found).
    unbroken_ctx = Context(model, task, seed=seed, n=n, components=components)
    try:
        located = unbroken_ctx.located
    except ValueError:  # no candidate for a role: the claims say so as errors; mutants act on the paper's sites
        located = None
    where = located.components if located is not None else PAPER
    unbroken_results, unbroken_checks = run_claims(unbroken_ctx, ids, jobs=jobs)
    unbroken = {r.claim: r.verdict for r in unbroken_results}
    cells, changed, results_of = [], {}, {"(unbroken)": unbroken_results}
    interfaces_of = {"(unbroken)": unbroken_checks}
    for name in names:
        progress(name)
        mutant = MUTANTS[name]
        mutated = build_mutant(name, model, seed, components=where)
        changed[name] = changed_parameters(model, mutated)
        mutant_ctx = Context(mutated, task, seed=seed, n=n)
        if located is not None:
            mutant_ctx.pin(located)
        # The interfaces are checked on every symmetry mutant (intact, at no cost: nothing is fitted
        # where the answers hold), beside the claims, and where a break is not seen by the claim it
        # belongs to (there an interface break is what can still show it), after them. A break its own
        # claim fails needs no fit.
        run = ids
        if judged_only and mutant.kind == "break":
            run = [c for c in ids if expected(c, mutant, unbroken.get(c, "error")) != "not judged"]
        results, checks = run_claims(mutant_ctx, run, jobs=jobs, interfaces=mutant.kind != "break")
        results_of[name] = results
        expect = {r.claim: expected(r.claim, mutant, unbroken.get(r.claim, "error")) for r in results}
        unseen = any(expect[r.claim] == "fail" and r.verdict != "fail" for r in results)
        if mutant.kind == "break":
            checks = check_all(mutant_ctx, claims=ids) if unseen else None
        if checks is not None:
            interfaces_of[name] = checks
        cells += [
            Cell(r.claim, name, r.verdict, expect[r.claim], r.reason, broken_naming(checks, r.claim)) for r in results
        ]
    return {
        "mutants": names,
        "claims": ids,
        "cells": cells,
        "changed": changed,
        "unbroken": unbroken,
        "interfaces": interfaces_of,  # hypotheses.interfaces.check_all per model where checked (see above)
        "judged_only": judged_only,
        "results": results_of,  # the ClaimResults themselves (not in the JSON): deciding values, evidence
    }


def evidence_values(results, required_only: bool = False) -> dict:
    """{claim: verdict, claim.item: value, claim.item.control: value} over a list of ClaimResults: every
    number a claim decides on, to compare two models that should compute the same function.
    ``required_only``: the verdicts and the required items' values alone."""
    out = {}
    for r in results:
        out[r.claim] = r.verdict
        for e in r.evidence:
            if required_only and not e.required:
                continue
            out[f"{r.claim}.{e.name}"] = e.measurement.value
            for c, m in sorted(e.controls.items()) if not required_only else ():
                out[f"{r.claim}.{e.name}.{c}"] = m.value
    return out


def symmetry_changes(matrix: dict) -> dict:
    """Per symmetry mutant of a ``mutation_matrix`` result: the claims whose verdict moved, the largest
    change of a numeric evidence value (controls included) from the unbroken model's and where it is, and
    the values that changed otherwise (to or from None or NaN). The function is the same, so all three
    should be nothing but float rounding. A change of basis of the residual stream (component
    ``residual_stream``) is compared on the verdicts and the required items' values only (``"compared":
    "required items"``): a supporting item may read the stream's own coordinates, which it does not fix,
    and a control drawn in the stream's metric is drawn afresh from the same distribution."""
    out = {}
    for name in matrix["mutants"]:
        if MUTANTS[name].kind != "symmetry":
            continue
        basis = MUTANTS[name].component == RESIDUAL_STREAM
        base = evidence_values(matrix["results"]["(unbroken)"], required_only=basis)
        got = evidence_values(matrix["results"][name], required_only=basis)
        largest, at, other = 0.0, None, []
        for key, v in base.items():
            w = got.get(key)
            if key in matrix["unbroken"]:  # a verdict, counted below
                continue
            if _number(v) and _number(w):
                if abs(w - v) > largest:
                    largest, at = abs(w - v), key
            elif not (v == w or (_nan(v) and _nan(w))):
                other.append(key)
        moved = sorted(c for c in matrix["unbroken"] if got.get(c) != matrix["unbroken"][c])
        out[name] = {"verdicts_changed": moved, "largest_value_change": largest, "at": at, "other_changes": other}
        if basis:
            out[name]["compared"] = "required items"
    return out


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not math.isnan(x)


def _nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def matrix_to_dict(matrix: dict) -> dict:
    """JSON-able form of a ``mutation_matrix`` result (sorted, rounded: byte-stable)."""
    cells = [{**asdict(c), "right": c.right} for c in matrix["cells"]]
    judged = [c for c in matrix["cells"] if c.judged]
    only = {"judged_only": True} if matrix.get("judged_only") else {}  # a full matrix's bytes stay as they were
    return _r(
        {
            "schema": MATRIX_SCHEMA,
            **only,
            "mutants": [
                {
                    "name": m,
                    "component": MUTANTS[m].component,
                    "kind": MUTANTS[m].kind,
                    "description": MUTANTS[m].description,
                    "changed_parameters": matrix["changed"][m],
                }
                for m in matrix["mutants"]
            ],
            "claims": matrix["claims"],
            "unbroken": matrix.get("unbroken", {}),
            "interfaces": {
                m: {c["interface"]: c["verdict"] for c in checks or []}
                for m, checks in matrix.get("interfaces", {}).items()
            },
            "cells": cells,
            "summary": {
                "judged": len(judged),
                "right": sum(1 for c in judged if c.right),
                "not_judged_failing_unbroken": sorted(c for c, v in matrix.get("unbroken", {}).items() if v != "pass"),
                "wrong": [
                    f"{c.claim} on {c.mutant}: {c.verdict}, expected {c.expected}" for c in judged if not c.right
                ],
            },
        }
    )


def text_table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    """The lines of a table: Markdown, or plain text in columns as wide as their widest cell."""
    if markdown:
        rule = "|" + "---|" * len(header)
        return ["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(x[i])) for x in [header] + rows) for i in range(len(header))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    return [fmt.format(*header), fmt.format(*["-" * w for w in widths])] + [fmt.format(*r) for r in rows]


def render_matrix(doc: dict, markdown: bool = False) -> str:
    """The claim x mutant table: each cell the verdict, marked ✓ (expected), ✗ (wrong) or · (not judged)."""
    claims, mutants = doc["claims"], [m["name"] for m in doc["mutants"]]
    cell = {(c["claim"], c["mutant"]): c for c in doc["cells"]}

    def mark(c):
        return "·" if c["right"] is None else ("✓" if c["right"] else "✗")

    def shown(c):  # "/if": an interface naming the claim is broken (hypotheses/interfaces.py)
        return c["verdict"] + ("/if" if c.get("interface") else "") + " " + mark(c)

    rows = [[m] + [shown(cell[(c, m)]) if (c, m) in cell else "—" for c in claims] for m in mutants]
    if doc.get("unbroken"):  # the checkpoint itself, the row every other is read against
        rows.insert(0, ["(unbroken)"] + [doc["unbroken"].get(c, "-") for c in claims])
    header = ["mutant"] + claims
    s = doc["summary"]
    foot = f"{s['right']}/{s['judged']} judged cells as expected"
    if s.get("not_judged_failing_unbroken"):
        foot += (
            f"; not judged: {', '.join(s['not_judged_failing_unbroken'])} (does not pass on the unbroken "
            "checkpoint, so no break can be seen in it)"
        )
    lines = text_table(header, rows, markdown)
    if markdown:
        return "\n".join(lines + ["", foot] + [f"- wrong: {w}" for w in s["wrong"]]) + "\n"
    lines += [
        "",
        "✓ verdict as expected   ✗ not as expected   · downstream of the break: shown, not judged   "
        "/if an interface naming the claim is broken"
        + ("   — not run (--judged-only)" if doc.get("judged_only") else ""),
        foot,
    ]
    lines += [f"wrong: {w}" for w in s["wrong"]]
    return "\n".join(lines) + "\n"
