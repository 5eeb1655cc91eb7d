"""Calibration of the claims: how often a claim sees a break of what it owns (power), how often it fails
where nothing it owns was touched (false alarms), and how often its intervals hold the value they estimate
(coverage). A verdict is worth what these three numbers say; ``assignadd-mutants --calibrate`` measures them
on the checkpoints given. Over the checkpoints on which claim c passes unbroken:

    power(c)       = share of the break mutants c should fail on which it fails (or an interface names it)
    false_alarm(c) = share of the models c should keep passing on (downstream breaks, symmetry mutants,
                     noise copies) on which it fails; an inconclusive verdict is counted apart in both
    coverage(c)    = share of (required item, pool seed) whose interval at n holds its value at 10 n

Which models, why 10 n, why the planted models are left out: docs/calibration.md.
"""

from __future__ import annotations

import copy

import torch

from ..interventions.mutants import MUTANTS
from ..random_streams import torch_generator
from . import run_all
from .base import Context, _r
from .mutation import matrix_to_dict, mutation_matrix, symmetry_changes, text_table

CALIBRATION_SCHEMA = "assignadd.calibration/1"
NOISE_SCALE = 0.01  # noise per weight tensor, relative to its RMS: small enough to keep the answers
COVERAGE_FACTOR = 10  # the reference pool for coverage is this many times the pool under test
AGREEMENT_POOLS = ("0var_train", "1var_train", "2var_train", "0var_heldout_pair")


def noise_copy(model, seed: int, index: int, scale: float = NOISE_SCALE):
    """``model`` with every weight tensor W replaced by W + scale * rms(W) * G, G standard Gaussian from
    the stream ``(seed, "noise copy <index>")``; a tensor that is exactly zero (a frozen MLP) stays zero."""
    noisy = copy.deepcopy(model)
    gen = torch_generator(seed, f"noise copy {index}")
    with torch.no_grad():
        for _, p in sorted(noisy.named_parameters()):
            rms = p.detach().double().pow(2).mean().sqrt().item()
            if rms > 0:
                p.add_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * (scale * rms))
    return noisy


def answer_agreement(model, other, ctx: Context) -> float:
    """Share of the sequences of ``AGREEMENT_POOLS`` (the context's pool size each) on which the two
    models give the same answer at `=`."""
    from ..interventions import run
    from .measures.circuits import last_position_correct

    same = []
    for name in AGREEMENT_POOLS:
        tokens, _ = ctx.pool(name)
        with torch.no_grad():
            answers = run(model, tokens, [], last_only=True).last_logits.argmax(-1)  # ``model``'s own answers
        same.append(last_position_correct(other, tokens, answers))
    return float(torch.cat(same).double().mean())


def _count(cells: list[tuple[str, str]], wanted: str) -> dict:
    """{"models", "hits", "inconclusive", "rate"} over the (verdict, expected) cells with expected ==
    ``wanted``; a hit is a "fail" verdict: a detection where "fail" was expected (power), a false alarm
    where "pass" was."""
    rel = [v for v, e in cells if e == wanted]
    hits = sum(1 for v in rel if v == "fail")
    return {
        "models": len(rel),
        "hits": hits,
        "inconclusive": sum(1 for v in rel if v == "inconclusive"),
        "rate": hits / len(rel) if rel else None,
    }


def _interval_items(result) -> dict[str, tuple]:
    """{item name: (value, low, high)} of a claim result's required items that have a sampling interval."""
    out = {}
    for e in result.evidence:
        m = e.measurement
        if e.required and None not in (m.value, m.low, m.high) and m.low != m.high:
            out[e.name] = (m.value, m.low, m.high)
    return out


def coverage(model, task, *, n: int, seeds: list[int], claims=None, progress=None) -> dict:
    """{claim: {"items": {item: {"covered", "runs", "truth"}}, "covered", "runs", "rate"}}: how often each
    required item's interval at ``n`` (pool seeds ``seeds``) holds its value at ``COVERAGE_FACTOR * n``
    (pool seed ``max(seeds) + 1``, so its pools are not the ones under test)."""
    progress = progress or (lambda message: None)
    progress(f"coverage: reference pool of {COVERAGE_FACTOR * n}")
    truth_seed = max(seeds) + 1
    truth = {r.claim: r for r in run_all(Context(model, task, seed=truth_seed, n=COVERAGE_FACTOR * n), claims)}
    tally: dict = {c: {} for c in truth}
    for s in seeds:
        progress(f"coverage: seed {s}")
        for r in run_all(Context(model, task, seed=s, n=n), claims):
            ref = {k: v[0] for k, v in _interval_items(truth[r.claim]).items()}
            for name, (_, low, high) in _interval_items(r).items():
                if name not in ref:
                    continue
                t = tally[r.claim].setdefault(name, {"covered": 0, "runs": 0, "truth": ref[name]})
                t["runs"] += 1
                t["covered"] += int(low <= ref[name] <= high)
    out = {}
    for claim, items in tally.items():
        runs = sum(t["runs"] for t in items.values())
        covered = sum(t["covered"] for t in items.values())
        out[claim] = {"items": items, "covered": covered, "runs": runs, "rate": covered / runs if runs else None}
    return out


def calibrate(
    checkpoints: list[tuple[str, object]],
    task_of,
    *,
    seed: int = 0,
    n: int = 1000,
    noise_copies: int = 3,
    coverage_seeds: int = 3,
    claims=None,
    mutants=None,
    progress=None,
) -> dict:
    """The calibration document: per checkpoint the mutation matrix's cells, the noise copies' verdicts
    and agreements, and each claim's coverage; per claim power, false alarms and coverage pooled over the
    checkpoints. ``checkpoints``: [(label, model)]; ``task_of(label)``: the task the model was trained on."""
    per_checkpoint, pooled = {}, {}
    for label, model in checkpoints:
        task = task_of(label)

        def say(msg, label=label):
            if progress:
                progress(f"{label}: {msg}")

        # Power and false alarms count judged cells only, so the cells never judged are not run.
        matrix = mutation_matrix(
            model, task, seed=seed, n=n, mutants=mutants, claims=claims, progress=say, judged_only=True
        )
        unbroken = matrix["unbroken"]
        for claim in matrix["claims"]:  # the table's rows in the claims' order, whichever cells were run
            pooled.setdefault(claim, {"cells": [], "coverage": [0, 0]})
        # A symmetry mutant of a claim that does not pass unbroken is expected to keep that verdict; it is
        # neither a break to detect nor a pass to keep, so it is counted nowhere.
        # A break seen as a broken interface naming the claim (the cell's ``interface``) is a detection.
        cells = [
            (c.claim, "fail" if c.expected == "fail" and c.interface else c.verdict, c.expected)
            for c in matrix["cells"]
            if MUTANTS[c.mutant].kind == "break" or c.expected == "pass"
        ]
        noise = []
        for k in range(noise_copies):
            say(f"noise copy {k}")
            noisy = noise_copy(model, seed, k)
            ctx = Context(model, task, seed=seed, n=n)
            verdicts = {r.claim: r.verdict for r in run_all(Context(noisy, task, seed=seed, n=n), claims)}
            noise.append({"copy": k, "answer_agreement": answer_agreement(model, noisy, ctx), "verdicts": verdicts})
            # a noise copy is expected to keep every verdict the unbroken checkpoint passes
            cells += [(c, v, "pass" if unbroken.get(c) == "pass" else "not judged") for c, v in verdicts.items()]
        cov = coverage(
            model, task, n=n, seeds=[seed + 1 + i for i in range(coverage_seeds)], claims=claims, progress=say
        )
        per_checkpoint[label] = {
            "unbroken": unbroken,
            "mutation_summary": {
                k: v for k, v in matrix_to_dict(matrix)["summary"].items() if k in ("judged", "right", "wrong")
            },
            "symmetry": symmetry_changes(matrix),
            "noise_copies": noise,
            "coverage": cov,
        }
        for claim, verdict, exp in cells:
            pooled.setdefault(claim, {"cells": [], "coverage": [0, 0]})["cells"].append((verdict, exp))
        for claim, c in cov.items():
            counts = pooled.setdefault(claim, {"cells": [], "coverage": [0, 0]})["coverage"]
            counts[0] += c["covered"]
            counts[1] += c["runs"]
    table = []  # a list, in the claims' order, so that a JSON with sorted keys keeps it
    for claim, p in pooled.items():
        cov_hit, cov_runs = p["coverage"]
        table.append(
            {
                "claim": claim,
                "power": _count(p["cells"], "fail"),
                "false_alarm": _count(p["cells"], "pass"),
                "coverage": {"covered": cov_hit, "runs": cov_runs, "rate": cov_hit / cov_runs if cov_runs else None},
            }
        )
    return _r(
        {
            "schema": CALIBRATION_SCHEMA,
            "seed": seed,
            "n": n,
            "noise_scale": NOISE_SCALE,
            "coverage_factor": COVERAGE_FACTOR,
            "mutants": sorted(mutants or MUTANTS),
            "checkpoints": per_checkpoint,
            "claims": table,
        }
    )


def render_calibration(doc: dict, markdown: bool = False) -> str:
    """The per-claim table: power, false alarms (with inconclusive counts) and coverage."""

    def frac(d, key="hits", total="models"):
        if not d[total]:
            return "-"
        return f"{d[key]}/{d[total]} = {d[key] / d[total]:.2f}"

    header = ["claim", "power (fails its own breaks)", "inconclusive", "false alarms", "inconclusive", "coverage"]
    rows = []
    for t in doc["claims"]:
        p, f, c = t["power"], t["false_alarm"], t["coverage"]
        rows.append(
            [t["claim"], frac(p), str(p["inconclusive"]), frac(f), str(f["inconclusive"]), frac(c, "covered", "runs")]
        )
    labels = ", ".join(doc["checkpoints"])
    foot = (
        f"checkpoints: {labels}; n = {doc['n']}, seed {doc['seed']}; noise copies at {doc['noise_scale']} x each "
        f"tensor's RMS; coverage against a pool {doc['coverage_factor']}x larger"
    )
    per_checkpoint = [_checkpoint_line(label, c) for label, c in doc["checkpoints"].items()]
    lines = text_table(header, rows, markdown)
    if markdown:
        return "\n".join(lines + ["", foot, ""] + [f"- {x}" for x in per_checkpoint]) + "\n"
    return "\n".join(lines + ["", foot] + per_checkpoint) + "\n"


def _checkpoint_line(label: str, c: dict) -> str:
    """One checkpoint's matrix and symmetry mutants in a sentence."""
    m = c["mutation_summary"]
    text = f"{label}: {m['right']}/{m['judged']} judged mutant cells as expected"
    if m.get("wrong"):
        text += " (not: " + "; ".join(m["wrong"]) + ")"
    sym = c.get("symmetry", {})
    if sym:
        moved = sorted({claim for s in sym.values() for claim in s["verdicts_changed"]})
        largest = max(sym.values(), key=lambda s: s["largest_value_change"])
        other = sorted({k for s in sym.values() for k in s["other_changes"]})
        text += (
            f"; {len(sym)} symmetry mutants: verdicts changed "
            + (", ".join(moved) if moved else "none")
            + (
                f", largest evidence value change {largest['largest_value_change']:.2g} ({largest['at']})"
                if largest["largest_value_change"]
                else ", every evidence value the same to 6 decimals"
            )
            + (", changed otherwise: " + ", ".join(other) if other else "")
        )
    return text


__all__ = ["calibrate", "coverage", "noise_copy", "render_calibration"]
