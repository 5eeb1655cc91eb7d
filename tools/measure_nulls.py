"""Measure every per-checkpoint claim's re-initialised null on each shipped shape, and the series claim's
time-axis controls on the reference run's log; write docs/nulls.json and docs/nulls.md.

A claim's ``reinitialised`` control is its claimed measurement on ``Context.reinitialised_model()``:
``AssignAddTransformer(cfg, seed=10_000 + s)`` for context seed s. Here that model is the model under
test itself (``Context(model, Task(), n=500, seed=s)``), for s in 0-4, so each item's value IS its
re-initialised null, measured the way the claim measures it (only the claimed arm; the claim's own
controls are not run on it). A random model has nothing to locate, so the components are pinned to
the paper's roles on the first two layers (previous-token head 0.0, fetching head 1.0) and the MLP to
the only layer with one (the paper's and the two-head model's layer 1, the three-layer model's layer 2).

Shapes (docs/variants.md): the paper's ``ModelConfig()``; two heads of 64 (``--n-heads 2 --d-head 64``);
three layers, the MLP in the last (``--n-layers 3``).

``learning_phases`` is decided on a series, not a model: its controls (the same checkpoints with their
steps permuted, or reversed) are measured on the reference run's training log (checkpoints/metrics.jsonl,
every pool's accuracy every 100 steps at n = 500), cut at 3,000, 10,000, 20,000 steps and whole.

Some bars also quote what a break of the component gives (a "mutant null": the item on the bundled
reference with one component broken, ``interventions.mutants``): those in ``MUTANT_NULLS`` are measured
here too, for the mutant's seeds 0-2 (each seed another random rotation), at n = 500 and pool seed 0.

A reason that quotes a null quotes it from here (tests/test_quoted_nulls.py checks every quoted
re-initialised number, and every quoted mutant null, against docs/nulls.json).

The file's date and commit say when its numbers were measured: a re-measurement that finds every number
as it was keeps them (``keep_stamp``), so the same code writes the same bytes
(``python tools/regenerate_docs.py --check --only nulls`` compares them).

    python tools/measure_nulls.py              # about 2 minutes of CPU on one thread (5 on a busy laptop)
    python tools/measure_nulls.py --render     # rewrite docs/nulls.md from docs/nulls.json only
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON_PATH = ROOT / "docs" / "nulls.json"
MD_PATH = ROOT / "docs" / "nulls.md"
METRICS = ROOT / "checkpoints" / "metrics.jsonl"
SEEDS = (0, 1, 2, 3, 4)
N = 500
SERIES_CUTS = (3_000, 10_000, 20_000, None)  # None: the whole log
# (claim, item) -> (the mutant a reason quotes, the words it is quoted after)
MUTANT_NULLS = {
    ("previous_token_head", "ov1_transmits_variables"): ("layer1_values_rotated", "input space rotated"),
    ("shared_residual", "ov2_transmits_numbers"): ("layer2_values_rotated", "input space rotated"),
    ("shared_residual", "value_route_shared"): ("layer2_values_rotated", "OV_2 input rotated"),
}
MUTANT_SEEDS = (0, 1, 2)
# (claim, item) -> (the shipped run's steps a reason quotes, the words it is quoted after): the item on the
# checkpoints of checkpoints/series/ before the mechanism forms, the components pinned to the paper's
STEP_NULLS = {
    ("shared_residual", "resid_mid_matches_constant_run"): (
        (500, 1000, 1500, 2000),
        "steps 500-2000 of the shipped run",
    ),
    ("shared_residual", "ov2_additivity"): ((500, 1000, 1500, 2000), "steps 500-2000 of the shipped run"),
    ("shared_residual", "constant_difference_moves_variable_run"): (
        (1000, 1500, 2000),
        "steps 1000-2000 of the shipped run",
    ),
    ("fourier_neurons", "single_frequency_neurons"): ((0,), "step 0 of the shipped run"),
}
SHAPE_TITLES = {"paper": "paper", "two_heads": "two heads", "three_layers": "three layers"}
# A shape's null depends on the shape (marked † in docs/nulls.md) where its range lies more than GAP outside the
# paper shape's, or its median more than MEDIAN from the paper shape's median.
GAP = 0.02
MEDIAN = 0.2
# Numbers a claim page quotes from an item's extras (not its value), measured alongside it: (claim, item) -> keys.
EXTRAS = {("identity_qk", "identity_block_diagonal"): ("median_margin_nats",)}


def shapes() -> dict:
    """name -> (ModelConfig, Components): the shipped shapes, pinned as described in the module."""
    from assignadd.model.components import Components
    from assignadd.model.transformer import ModelConfig

    return {
        "paper": (ModelConfig(), Components(0, 0, 1, 0, 1)),
        "two_heads": (ModelConfig(n_heads=2, d_head=64), Components(0, 0, 1, 0, 1)),
        "three_layers": (ModelConfig(n_layers=3, mlp_layers=(2,)), Components(0, 0, 1, 0, 2)),
    }


def reinitialised_context(cfg, components, seed: int, n: int = N):
    """The model ``Context(reference, seed=seed).reinitialised_model()`` builds for ``cfg``, as the model under
    test, its components pinned."""
    from assignadd import Task
    from assignadd.hypotheses import Context, locate
    from assignadd.model.transformer import AssignAddTransformer

    model = AssignAddTransformer(cfg, seed=10_000 + seed)
    return Context(model, Task(), n=n, seed=seed).pin(locate.given(components, model))


def _round(v) -> float | None:
    return None if v is None else round(float(v), 6)


def measure_item(ctx, item):
    """One item's claimed measurement on ``ctx``'s model: its ``Measurement`` (value None where it measured
    nothing)."""
    import torch

    from assignadd.hypotheses.base import Arm

    with torch.no_grad():
        return item.measure(ctx, Arm(ctx.model))


def measure_shape(cfg, components, seeds=SEEDS, n: int = N) -> dict:
    """claim -> item -> [value per seed] on re-initialised models of ``cfg``."""
    from assignadd.hypotheses import REGISTRY

    out: dict = {}
    for seed in seeds:
        ctx = reinitialised_context(cfg, components, seed, n)
        for cid, cls in REGISTRY.items():
            claim = cls()
            if claim.skip_note:
                continue
            for item in claim.items:  # declaration order, as the claim measures them
                m = measure_item(ctx, item)
                out.setdefault(cid, {}).setdefault(item.name, []).append(_round(m.value))
                for key in EXTRAS.get((cid, item.name), ()):
                    out[cid].setdefault(f"{item.name}.{key}", []).append(_round(m.extra[key]))
    return out


def summary(values: list) -> dict:
    known = [v for v in values if v is not None]
    return {
        "min": min(known) if known else None,
        "max": max(known) if known else None,
        "values": values,
    }


def series_records(cut: int | None) -> list[dict]:
    lines = [json.loads(line) for line in METRICS.read_text().splitlines() if line.strip()]
    return [
        {"step": r["step"], "values": {f"acc_{k}": v for k, v in r["accuracy"].items()}}
        for r in lines
        if cut is None or r["step"] <= cut
    ]


def measure_series() -> dict:
    """item -> control -> {cut: value} for learning_phases' time-axis controls on the reference log."""
    from assignadd.hypotheses.learning_phases import LearningPhases

    out: dict = {}
    for cut in SERIES_CUTS:
        records = series_records(cut)
        label = str(cut if cut is not None else records[-1]["step"])
        for e in LearningPhases().series_evidence(records):
            for control, m in e.controls.items():
                out.setdefault(e.name, {}).setdefault(control, {})[label] = _round(m.value)
    return out


def measure_mutant(cid: str, item: str, mutant: str, seed: int, n: int = N) -> float | None:
    """``cid``'s item ``item`` on the bundled reference with ``mutant`` built at ``seed`` (pool seed 0)."""
    import assignadd
    from assignadd import load_checkpoint
    from assignadd.hypotheses.mutation import build_mutant

    return _item_on(build_mutant(mutant, load_checkpoint(assignadd.reference_checkpoint()), seed), cid, item, n)


def _item_on(model, cid: str, item: str, n: int, components=None) -> float | None:
    """``cid``'s item ``item`` as the claim measures it on ``model`` (pool seed 0), the claimed arm only."""
    from assignadd.data import Task
    from assignadd.hypotheses import REGISTRY, Context
    from assignadd.hypotheses.base import CLAIMED, Arm

    declared = {i.name: i for i in REGISTRY[cid].items}[item]
    return _round(declared.measure(Context(model, Task(), n=n, components=components), Arm(model, CLAIMED)).value)


def measure_step(cid: str, item: str, step: int, n: int = N) -> float | None:
    """``cid``'s item ``item`` on the shipped run's checkpoint at ``step`` (pool seed 0, paper components)."""
    import assignadd
    from assignadd import load_checkpoint
    from assignadd.model.components import PAPER

    model = load_checkpoint(assignadd.reference_checkpoint().parent / "series" / f"step_{step:06d}.pt")
    return _item_on(model, cid, item, n, PAPER)


def measure_steps() -> dict:
    out: dict = {}
    for (cid, item), (steps, words) in STEP_NULLS.items():
        values = [measure_step(cid, item, step) for step in steps]
        out.setdefault(cid, {})[item] = {"steps": list(steps), "quoted_as": words, **summary(values)}
    return out


def measure_mutants() -> dict:
    out: dict = {}
    for (cid, item), (mutant, words) in MUTANT_NULLS.items():
        values = [measure_mutant(cid, item, mutant, seed) for seed in MUTANT_SEEDS]
        out.setdefault(cid, {})[item] = {"mutant": mutant, "quoted_as": words, **summary(values)}
    return out


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def measure() -> dict:
    import torch

    torch.set_num_threads(1)
    doc = {
        "tool": "tools/measure_nulls.py",
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "n": N,
        "seeds": list(SEEDS),
        "model": "AssignAddTransformer(cfg, seed=10_000 + s): Context(..., seed=s).reinitialised_model()",
        "shapes": {},
    }
    for name, (cfg, components) in shapes().items():
        t0 = time.perf_counter()
        raw = measure_shape(cfg, components)
        doc["shapes"][name] = {
            "config": {k: v for k, v in cfg.to_dict().items()},
            "components": f"prev={components.prev_layer}.{components.prev_head},"
            f"fetch={components.fetch_layer}.{components.fetch_head},mlp={components.mlp_layer}",
            "claims": {cid: {item: summary(v) for item, v in items.items()} for cid, items in raw.items()},
        }
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    doc["mutants"] = {
        "model": "the bundled reference with one component broken (interventions.mutants), pool seed 0",
        "seeds": list(MUTANT_SEEDS),
        "claims": measure_mutants(),
    }
    doc["steps"] = {
        "model": "the checkpoints of the shipped run (checkpoints/series/, seed 42) before its mechanism forms",
        "claims": measure_steps(),
    }
    doc["series"] = {
        "learning_phases": {
            "log": "checkpoints/metrics.jsonl (the reference run: every pool's accuracy every 100 steps, n = 500)",
            "cuts": "the log up to each step (the last: the whole log)",
            "items": measure_series(),
        }
    }
    return doc


STAMP = ("date", "commit")


def keep_stamp(doc: dict, previous: dict | None) -> dict:
    """``doc`` with the date and commit of ``previous`` (the nulls.json it replaces) when everything else,
    every measured number included, is the same in both; else ``doc`` as it is."""

    def measured(d: dict) -> dict:
        return json.loads(json.dumps({k: v for k, v in d.items() if k not in STAMP}))  # tuples as lists

    if previous is None or measured(doc) != measured(previous):
        return doc
    return {k: previous.get(k, v) if k in STAMP else v for k, v in doc.items()}


def _num(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def _range(s: dict) -> str:
    if s["min"] is None:
        return "none measured"
    dash = " to " if s["min"] < 0 or s["max"] < 0 else "-"
    lo, hi = _num(s["min"]), _num(s["max"])
    text = lo if lo == hi else f"{lo}{dash}{hi}"
    missing = sum(v is None for v in s["values"])
    return text + (f" ({missing} of {len(s['values'])} unmeasured)" if missing else "")


def _median(s: dict) -> float:
    known = sorted(v for v in s["values"] if v is not None)
    return (known[(len(known) - 1) // 2] + known[len(known) // 2]) / 2


def _differs(paper: dict, other: dict) -> bool:
    if paper["min"] is None or other["min"] is None:
        return (paper["min"] is None) != (other["min"] is None)
    apart = other["min"] > paper["max"] + GAP or other["max"] < paper["min"] - GAP
    return apart or abs(_median(other) - _median(paper)) > MEDIAN


def render(doc: dict) -> str:
    shapes_ = doc["shapes"]
    lines = [
        "# Re-initialised nulls, measured",
        "",
        f"*Generated by `python {doc['tool']}` on {doc['date']} at commit `{doc['commit']}`; the numbers are in "
        "[nulls.json](nulls.json). Do not edit: rerun the tool.*",
        "",
        "Each claim's `reinitialised` control is its claimed measurement on a freshly initialised model of the same "
        f"shape: {doc['model']}. Here that model is the model under test, at n = {doc['n']} and seeds "
        f"{', '.join(map(str, doc['seeds']))} (five models per shape), so each value is the item's null as its claim "
        "measures it. A random model has nothing to locate: the components are pinned to the paper's roles on the "
        "first two layers, the MLP to the only layer that has one. Each cell is the range over the five seeds.",
        "",
        "| shape | configuration | components |",
        "|---|---|---|",
    ]
    for name, s in shapes_.items():
        cfg = s["config"]
        conf = f"{cfg['n_layers']} layers, {cfg['n_heads']} head(s) of {cfg['d_head']}, MLP in layer(s) {cfg['mlp_layers']}"
        lines.append(f"| {SHAPE_TITLES[name]} | {conf} | `{s['components']}` |")
    lines += [
        "",
        f"**†**: the null depends on the architecture: the shape's range lies more than {GAP} outside the paper "
        f"shape's, or its median more than {MEDIAN} from the paper shape's. A bar argued from the paper shape's null "
        "must be read against that shape's own there. The three-layer model's embeddings and first two attention "
        "layers are drawn as the paper shape's (same seed, same draws), so the items that read only them give the "
        "same values.",
        "",
        "A reason (`Threshold` in `hypotheses/*.py`) that quotes a re-initialised number quotes the paper shape's "
        "range from here; `tests/test_quoted_nulls.py` checks every such number against nulls.json and re-measures "
        "the weights-only items on every shape.",
    ]
    paper = shapes_["paper"]["claims"]
    for cid, items in paper.items():
        lines += ["", f"## {cid}", "", "| item | " + " | ".join(SHAPE_TITLES[n] for n in shapes_) + " |"]
        lines.append("|---|" + "---|" * len(shapes_))
        for item, s in items.items():
            cells = []
            for name in shapes_:
                other = shapes_[name]["claims"][cid][item]
                mark = " †" if name != "paper" and _differs(s, other) else ""
                cells.append(_range(other) + mark)
            lines.append(f"| `{item}` | " + " | ".join(cells) + " |")
    mutants = doc.get("mutants")
    if mutants:
        lines += [
            "",
            "## Mutant nulls",
            "",
            f"What a break of the component gives, where a bar quotes it: {mutants['model']}, the mutant built with "
            f"seeds {', '.join(map(str, mutants['seeds']))} (each another random draw), n = {doc['n']}.",
            "",
            "| claim | item | mutant | quoted as | range |",
            "|---|---|---|---|---|",
        ]
        for cid, items in mutants["claims"].items():
            for item, m in items.items():
                lines.append(f"| {cid} | `{item}` | `{m['mutant']}` | {m['quoted_as']} | {_range(m)} |")
    early = doc.get("steps")
    if early:
        lines += [
            "",
            "## Before the mechanism forms",
            "",
            f"Where a bar quotes an early checkpoint: {early['model']}, n = {doc['n']}, the paper's components.",
            "",
            "| claim | item | steps | quoted as | range |",
            "|---|---|---|---|---|",
        ]
        for cid, items in early["claims"].items():
            for item, m in items.items():
                steps = ", ".join(f"{s:,}" for s in m["steps"])
                lines.append(f"| {cid} | `{item}` | {steps} | {m['quoted_as']} | {_range(m)} |")
    series = doc["series"]["learning_phases"]
    cuts = None
    lines += [
        "",
        "## learning_phases (time-axis controls)",
        "",
        f"A series claim has no re-initialised model; its controls are the same checkpoints with their steps "
        f"permuted, or reversed. Measured on {series['log']}, {series['cuts']}. — : the item finds no onset on the "
        "control (it cannot be placed in time, and fails). The permuted control's R^2 depends on the series: "
        "on a short one it can come near the bar.",
        "",
    ]
    for item, controls in series["items"].items():
        for control, by_cut in controls.items():
            if cuts is None:
                cuts = list(by_cut)
                lines += [
                    "| item | control | " + " | ".join(f"to step {int(c):,}" for c in cuts) + " |",
                    "|---|---|" + "---|" * len(cuts),
                ]
            lines.append(f"| `{item}` | {control} | " + " | ".join(_num(by_cut[c]) for c in cuts) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="rewrite docs/nulls.md from docs/nulls.json only")
    args = parser.parse_args(argv)
    if args.render:
        doc = json.loads(JSON_PATH.read_text())
    else:
        doc = keep_stamp(measure(), json.loads(JSON_PATH.read_text()) if JSON_PATH.exists() else None)
        JSON_PATH.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {JSON_PATH}", file=sys.stderr)
    MD_PATH.write_text(render(doc))
    print(f"wrote {MD_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
