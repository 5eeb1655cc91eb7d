"""Mutation testing of the claims: every claim on every component mutant of a checkpoint.

A verdict is about one mechanism only if breaking *that* mechanism fails it and breaking anything
downstream of it does not (SPEC §6). ``mutation_matrix`` runs the registered per-checkpoint claims on
the model and on each mutant of ``interventions.mutants`` and marks each cell against the expected
pattern: the broken component's claim fails, claims upstream of the break pass, behaviour claims
fail, downstream claims are shown but not judged. A claim that does not pass on the unbroken
checkpoint is shown but not judged on any mutant: a break cannot be seen in a claim already failing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data import Task
from ..interventions.mutants import MUTANTS, changed_parameters, expected
from .base import Context, _r
from . import run_all

MATRIX_SCHEMA = "assignadd.mutants/1"


@dataclass
class Cell:
    claim: str
    mutant: str
    verdict: str
    expected: str  # "pass", "fail" or "not judged"
    reason: str

    @property
    def judged(self) -> bool:
        return self.expected != "not judged"

    @property
    def right(self) -> bool | None:
        """None for a cell that is not judged; else whether the verdict is the expected one."""
        return None if not self.judged else self.verdict == self.expected


def mutation_matrix(
    model, task: Task | None = None, *, seed: int = 0, n: int = 1000, mutants=None, claims=None, progress=None
) -> dict:
    """{"mutants": [...], "claims": [...], "cells": [Cell, ...], "changed": {mutant: [parameter names]}}.

    ``mutants``: names from ``MUTANTS`` (default all); ``claims``: claim ids (default all registered
    per-checkpoint claims); ``progress``: optional callable(message) for long runs.
    """
    names = list(MUTANTS) if mutants is None else list(mutants)
    unknown = [m for m in names if m not in MUTANTS]
    if unknown:
        raise KeyError(f"unknown mutant(s): {', '.join(unknown)}; known: {', '.join(MUTANTS)}")
    # The unbroken checkpoint first: a claim that does not pass on it cannot show where a break is (every
    # mutant would fail it too), so its cells are shown, not judged.
    if progress:
        progress("unbroken")
    unbroken = {r.claim: r.verdict for r in run_all(Context(model, task, seed=seed, n=n), claims)}
    cells, changed, claim_ids = [], {}, None
    for name in names:
        if progress:
            progress(name)
        mutant = MUTANTS[name]
        mutated = mutant(model, seed)
        changed[name] = changed_parameters(model, mutated)
        results = run_all(Context(mutated, task, seed=seed, n=n), claims)
        claim_ids = [r.claim for r in results]
        cells += [
            Cell(
                r.claim,
                name,
                r.verdict,
                expected(r.claim, mutant) if unbroken.get(r.claim) == "pass" else "not judged",
                r.reason,
            )
            for r in results
        ]
    return {
        "mutants": names,
        "claims": claim_ids or list(claims or []),
        "cells": cells,
        "changed": changed,
        "unbroken": unbroken,
    }


def matrix_to_dict(matrix: dict) -> dict:
    """JSON-able form of a ``mutation_matrix`` result (sorted, rounded: byte-stable)."""
    cells = [
        {
            "claim": c.claim,
            "mutant": c.mutant,
            "verdict": c.verdict,
            "expected": c.expected,
            "right": c.right,
            "reason": c.reason,
        }
        for c in matrix["cells"]
    ]
    judged = [c for c in matrix["cells"] if c.judged]
    return _r(
        {
            "schema": MATRIX_SCHEMA,
            "mutants": [
                {
                    "name": m,
                    "component": MUTANTS[m].component,
                    "description": MUTANTS[m].description,
                    "changed_parameters": matrix["changed"][m],
                }
                for m in matrix["mutants"]
            ],
            "claims": matrix["claims"],
            "unbroken": matrix.get("unbroken", {}),
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


def render_matrix(doc: dict, markdown: bool = False) -> str:
    """The claim x mutant table: each cell the verdict, marked ✓ (expected), ✗ (wrong) or · (not judged)."""
    claims, mutants = doc["claims"], [m["name"] for m in doc["mutants"]]
    cell = {(c["claim"], c["mutant"]): c for c in doc["cells"]}

    def mark(c):
        return "·" if c["right"] is None else ("✓" if c["right"] else "✗")

    rows = [[m] + [f"{cell[(c, m)]['verdict']} {mark(cell[(c, m)])}" for c in claims] for m in mutants]
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
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines + ["", foot] + [f"- wrong: {w}" for w in s["wrong"]]) + "\n"
    widths = [max(len(str(x[i])) for x in [header] + rows) for i in range(len(header))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    lines = [fmt.format(*header), fmt.format(*["-" * w for w in widths])] + [fmt.format(*r) for r in rows]
    lines += ["", "✓ verdict as expected   ✗ not as expected   · downstream of the break: shown, not judged", foot]
    lines += [f"wrong: {w}" for w in s["wrong"]]
    return "\n".join(lines) + "\n"
