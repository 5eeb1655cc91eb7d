"""A checkpoint series turned into curves (SPEC §4.5): per checkpoint, every pool's accuracy, the
authors' progress measures and each registered claim's verdict; then the learning phases.

The folders and file names it reads (ours and the authors'): docs/dynamics.md.

Speed. The pools and the task are built once per process and reused for every checkpoint; accuracy
goes through ``model.last_logits`` (the last position only); the probe is a closed-form least-squares
classifier; ``jobs`` spreads checkpoints over processes with one torch thread each. Every process
computes in one thread, so the numbers do not depend on ``jobs``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..data import Task, TaskConfig
from ..fileio import sha256_file
from ..hypotheses.learning_phases import SERIES_REGISTRY, detect_phases, ends_early_text, open_at_end
from ..hypotheses.measures.progress import DEFAULT_N, POOL_SEED, ROUTING_POOL, SeriesMeasurer, measure_definitions
from ..model.checkpoint import CheckpointError, load_checkpoint_full, read_checkpoint_file
from .render import fmt, fmt_span

SCHEMA = "assignadd.series/1"
DEFAULT_CLAIMS = 8  # checkpoints on which every registered claim runs (see compute_series)
OURS = re.compile(r"^step_(\d+)\.pt$")
AUTHORS = re.compile(r"^checkpoint_step_(\d+)\.pth$")
FINAL_NAMES = ("final.pt", "model_state_dict.pth")


class SeriesError(ValueError):
    """A folder that holds no usable checkpoint series; the message is one line."""


@dataclass(frozen=True)
class Entry:
    path: Path
    step: int
    step_from: str  # "file name", "checkpoint metadata" or "inferred"


def _step_of_final(path: Path) -> int | None:
    try:
        obj = read_checkpoint_file(path)
    except Exception:
        return None  # load_checkpoint_full reports it properly later
    step = obj.get("step") if isinstance(obj, dict) else None
    return int(step) if isinstance(step, int) and not isinstance(step, bool) else None


def find_checkpoints(path) -> list[Entry]:
    """The checkpoints of a run folder or a plain folder, ordered by step."""
    root = Path(path)
    if not root.exists():
        raise SeriesError(f"{root}: no such folder")
    if not root.is_dir():
        raise SeriesError(f"{root}: not a folder (expected a run folder or a folder of checkpoints)")
    folders = [root / "checkpoints", root] if (root / "checkpoints").is_dir() else [root]
    numbered: dict[int, Path] = {}
    finals: list[Path] = []
    for folder in folders:
        for f in filter(Path.is_file, sorted(folder.iterdir())):
            m = OURS.match(f.name) or AUTHORS.match(f.name)
            if m:
                step = int(m.group(1))
                if step in numbered:
                    raise SeriesError(f"{root}: two checkpoints for step {step}: {numbered[step].name} and {f.name}")
                numbered[step] = f
            elif f.name in FINAL_NAMES:
                finals.append(f)
    entries = [Entry(p, s, "file name") for s, p in sorted(numbered.items())]
    if len(finals) > 1:
        raise SeriesError(f"{root}: more than one final checkpoint ({', '.join(f.name for f in finals)})")
    if finals:
        f, last = finals[0], (entries[-1].step if entries else None)
        step = _step_of_final(f)
        if step is None:  # the authors' final state dict has no step: one checkpoint interval after the last
            gap = int(np.median(np.diff([e.step for e in entries]))) if len(entries) > 1 else 1
            entries.append(Entry(f, (last + gap) if last is not None else 0, "inferred"))
        elif last is None or step > last:  # (at the last numbered step it duplicates that one, which stays)
            entries.append(Entry(f, step, "checkpoint metadata"))
    if not entries:
        raise SeriesError(
            f"{root}: no checkpoints (expected step_NNNNNN.pt, checkpoint_step_N.pth, final.pt or model_state_dict.pth)"
        )
    return entries


def thin(entries: list[Entry], every: int) -> list[Entry]:
    """Every ``every``-th checkpoint in step order, the last one always included."""
    if every < 1:
        raise SeriesError(f"--every must be at least 1, got {every}")
    keep = entries[::every]
    if keep[-1] is not entries[-1]:
        keep.append(entries[-1])
    return keep


# ----- the worker: one measurer per process, reused for every checkpoint it is given -----------
_MEASURER: SeriesMeasurer | None = None


def _init_worker(task_config: dict, n: int, claims_n: int) -> None:
    global _MEASURER
    torch.set_num_threads(1)
    _MEASURER = SeriesMeasurer(Task(**TaskConfig.from_dict(task_config).__dict__), n, claims_n)


def _measure_one(path: str, with_claims: bool) -> dict:
    try:
        model, meta = load_checkpoint_full(path)
    except CheckpointError as e:
        return {"error": str(e)}
    got, want = (model.cfg.d_vocab, model.cfg.d_vocab_out), (_MEASURER.task.vocab.size, _MEASURER.task.vocab.modulus)
    if got != want:
        return {"error": f"{path}: model vocabulary {got} does not match the series' task {want}"}
    out = {"values": _MEASURER.measure(model)}
    if with_claims:
        out["claims"] = _MEASURER.claims(model)
    return out


def _task_config(root: Path, entries: list[Entry]) -> TaskConfig:
    """The series' task: run.json of a run folder, else the checkpoints' own metadata, else the paper's."""
    run_json = root / "run.json"
    if run_json.is_file():
        try:
            return TaskConfig.from_dict(json.loads(run_json.read_text())["task"])
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise SeriesError(f"{run_json}: cannot read the task from it ({type(e).__name__}: {e})") from None
    for e in (entries[0], entries[-1]):
        try:
            obj = read_checkpoint_file(e.path)
        except Exception:
            continue  # reported when the file is measured
        if isinstance(obj, dict) and isinstance(obj.get("task"), dict):
            return TaskConfig.from_dict(obj["task"])
    return TaskConfig()


def claim_indices(n_checkpoints: int, n_claims: int) -> list[int]:
    """``n_claims`` checkpoint indices spread evenly over the series, the first and the last included
    (the last alone for 1; none for 0)."""
    if n_claims <= 0 or n_checkpoints == 0:
        return []
    if n_claims == 1 or n_checkpoints == 1:
        return [n_checkpoints - 1]
    return sorted({round(i * (n_checkpoints - 1) / (n_claims - 1)) for i in range(n_claims)})


def compute_series(
    path,
    *,
    every: int = 1,
    jobs: int = 1,
    n: int = DEFAULT_N,
    claims: int = DEFAULT_CLAIMS,
    claims_n: int = 2000,
    progress: bool = True,
) -> dict:
    """The ``assignadd.series/1`` document of a folder of checkpoints (see the module docstring).

    ``claims``: on how many checkpoints (evenly spread, first and last included) to run every
    registered claim: a claim run with its controls and interventions costs tens of CPU-seconds, the
    curves under one. Raises ``SeriesError`` (one line) for bad input; nothing is written here.
    """
    for flag, value, least in (("--n", n, 10), ("--jobs", jobs, 1)):
        if value < least:
            raise SeriesError(f"{flag} must be at least {least}, got {value}")
    if claims < 0:
        raise SeriesError(f"--claims must be 0 (none) or positive, got {claims}")
    root = Path(path)
    entries = thin(find_checkpoints(root), every)
    task_cfg = _task_config(root, entries)
    chosen = set(claim_indices(len(entries), claims))
    with_claims = [i in chosen for i in range(len(entries))]
    args = (task_cfg.to_dict(), n, claims_n)
    from tqdm.auto import tqdm

    results: list[dict] = [{}] * len(entries)
    bar = tqdm(total=len(entries), desc="assignadd-report", unit="ckpt", dynamic_ncols=True, disable=not progress)

    def take(i: int, result: dict) -> None:  # the result of entries[i], from this process or a worker
        if "error" in result:
            raise SeriesError(result["error"])
        results[i] = result
        bar.update(1)

    with bar:
        if jobs == 1:
            old_threads = torch.get_num_threads()
            try:
                _init_worker(*args)
                for i, e in enumerate(entries):
                    take(i, _measure_one(str(e.path), with_claims[i]))
            finally:
                torch.set_num_threads(old_threads)
        else:
            with ProcessPoolExecutor(
                max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_init_worker, initargs=args
            ) as pool:
                futures = {pool.submit(_measure_one, str(e.path), with_claims[i]): i for i, e in enumerate(entries)}
                try:
                    for fut in as_completed(futures):
                        take(futures[fut], fut.result())
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise

    checkpoints = []
    for e, r in zip(entries, results):  # where the checkpoint is, then its values and (where they ran) the claims
        where = {"step": e.step, "file": str(e.path.relative_to(root)), "step_from": e.step_from}
        checkpoints.append({**where, "sha256": sha256_file(e.path), **r})
    doc = {
        "schema": SCHEMA,
        "source": str(path),
        "task": task_cfg.to_dict(),
        "settings": dict(
            n=n, every=every, pool_seed=POOL_SEED, claims=claims, claims_n=claims_n, routing_pool=ROUTING_POOL
        ),
        "measures": measure_definitions(Task(**task_cfg.to_dict())),
        "checkpoints": checkpoints,
    }
    doc["phases"] = detect_phases(checkpoints)
    doc["claims_first_hold"] = claims_first_hold(checkpoints)
    doc["verdict_timeline"] = claims_timeline(checkpoints)
    doc["series_claims"] = {cid: cls().run_series(doc).to_dict() for cid, cls in SERIES_REGISTRY.items()}
    return doc


def claims_first_hold(checkpoints: list[dict]) -> dict:
    """Per claim: the first evaluated step from which it passes at every later evaluated checkpoint, and
    the evaluated step just before it, where it did not (None when it held from the first evaluated
    checkpoint): the claim began to hold somewhere between the two, known no better than the
    ``--claims`` checkpoints place it (where ``verdict_timeline`` says it settles, for a pass)."""
    evaluated = [c for c in checkpoints if "claims" in c]
    ids = sorted({cid for c in evaluated for cid in c["claims"]})
    out = {}
    for cid in ids:
        verdicts = [(c["step"], c["claims"].get(cid, {}).get("verdict")) for c in evaluated]
        settled = verdict_timeline([s for s, _ in verdicts], [v for _, v in verdicts])
        holds = settled["final"] == "pass"
        # every change of verdict is listed; a pass followed by anything else is a flip back
        changes = [(a[0], b[0], a[1], b[1]) for a, b in zip(verdicts, verdicts[1:]) if a[1] != b[1]]
        out[cid] = {
            "first_step_holding": settled["settles_at"] if holds else None,
            "last_step_not_holding": settled["settled_after"] if holds else None,
            "evaluated_steps": settled["steps"],
            "verdicts": settled["verdicts"],
            "verdict_changes": len(changes),
            "flips_back": [
                {"from_step": a, "to_step": b, "from": va, "to": vb} for a, b, va, vb in changes if va == "pass"
            ],
        }
    return out


DECIDED = ("pass", "fail")


def verdict_timeline(steps: list[int], verdicts: list[str | None]) -> dict:
    """A claim's verdicts along a series, read as a timeline: where it settles, and every flip. A
    mechanism, once formed, should not come and go; the timeline says whether it did (definitions and
    examples: docs/reports.md, "A series: the verdict timeline").

    - a *flip* is a change between two consecutive decided verdicts (``pass``, ``fail``); an undecided one
      between them (``inconclusive``, ``error``, None) neither makes nor hides one, and is listed with it
      (``undecided_between``);
    - the claim *settles at* the first step from which every verdict equals the last, a decided one (it
      settled in ``(settled_after, settles_at]``); None when the series ends undecided;
    - it is *flagged* when it flips more than once or gives an ``error`` anywhere.

    ``steps`` ascending and ``verdicts`` of the same length. Pure: the same lists give the same dict.
    """
    if len(steps) != len(verdicts):
        raise ValueError(f"{len(steps)} steps but {len(verdicts)} verdicts")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError("steps must be strictly increasing")
    final = verdicts[-1] if verdicts else None
    settles_at = settled_after = None
    if final in DECIDED:
        i = len(verdicts) - 1
        while i > 0 and verdicts[i - 1] == final:
            i -= 1
        settles_at, settled_after = steps[i], (steps[i - 1] if i > 0 else None)
    flips, last, skipped = [], None, []  # last: (step, verdict) of the latest decided checkpoint so far
    for step, v in zip(steps, verdicts):
        if v not in DECIDED:
            if last is not None:
                skipped.append(step)
            continue
        if last is not None and v != last[1]:
            flips.append(
                {"from_step": last[0], "to_step": step, "from": last[1], "to": v, "undecided_between": skipped}
            )
        last, skipped = (step, v), []
    errors = [s for s, v in zip(steps, verdicts) if v == "error"]
    reasons = [f"flips {len(flips)} times"] if len(flips) > 1 else []
    if errors:
        reasons.append(f"error at step{'s' if len(errors) > 1 else ''} {', '.join(map(str, errors))}")
    return {
        "steps": list(steps),
        "verdicts": list(verdicts),
        "final": final,
        "settles_at": settles_at,
        "settled_after": settled_after,
        "flips": flips,
        "multiple_flips": len(flips) > 1,
        "errors": errors,
        "flagged": bool(reasons),
        "flag_reasons": reasons,
    }


def _item_change(a: dict, b: dict) -> dict | None:
    """An evidence item at two checkpoints (``item_numbers`` records), when its status or a control's
    status differs between them; None when nothing about its decision changed."""
    controls = {
        name: {"from": a["controls"].get(name), "to": b["controls"].get(name)}
        for name in sorted(set(a["controls"]) | set(b["controls"]))
        if (a["controls"].get(name) or {}).get("status") != (b["controls"].get(name) or {}).get("status")
    }
    if a["status"] == b["status"] and not controls:
        return None
    side = ("status", "value", "ci")
    return {
        "name": b["name"],
        "kind": b["kind"],
        "required": b["required"],
        "threshold": b.get("threshold"),
        "from": {k: a[k] for k in side},
        "to": {k: b[k] for k in side},
        "controls": controls,
    }


def claims_timeline(checkpoints: list[dict]) -> dict:
    """Per claim, its ``verdict_timeline`` over the checkpoints where claims ran; each flip also names the
    evidence items whose status (or a control's) differs between its two checkpoints, with their numbers
    (``changed_items``; None where the checkpoints carry no item numbers)."""
    evaluated = [c for c in checkpoints if "claims" in c]
    ids = sorted({cid for c in evaluated for cid in c["claims"]})
    out = {}
    for cid in ids:
        records = {c["step"]: c["claims"].get(cid) or {} for c in evaluated}
        t = verdict_timeline([c["step"] for c in evaluated], [records[c["step"]].get("verdict") for c in evaluated])
        for f in t["flips"]:
            a, b = records[f["from_step"]].get("items"), records[f["to_step"]].get("items")
            if a is None or b is None:
                f["changed_items"] = None
                continue
            before = {x["name"]: x for x in a}
            changes = [_item_change(before[x["name"]], x) for x in b if x["name"] in before]
            f["changed_items"] = [x for x in changes if x is not None]
        out[cid] = t
    return out


def timeline_text(t: dict) -> str:
    """A claim's timeline in one line: its final verdict, where it settled, and every flip."""
    if t["final"] not in DECIDED:
        where = f"not settled: {t['final'] or 'no verdict'} at the last evaluated checkpoint"
    elif t["settled_after"] is None:
        where = f"{t['final']} at all {len(t['steps'])} evaluated checkpoints"
    else:
        where = f"settles {t['final']} between steps {t['settled_after']} and {t['settles_at']}"
    flips = "; ".join(f"{f['from']} -> {f['to']} between steps {f['from_step']} and {f['to_step']}" for f in t["flips"])
    flag = f" [FLAGGED: {'; '.join(t['flag_reasons'])}]" if t["flagged"] else ""
    return where + (f"; flips: {flips}" if flips else "; no flip") + flag


def first_hold_text(h: dict) -> str:
    """Where a per-checkpoint claim starts to hold (an entry of ``claims_first_hold``), only as precisely
    as it was evaluated."""
    first, before, n = h["first_step_holding"], h.get("last_step_not_holding"), len(h["evaluated_steps"])
    back = h.get("flips_back") or []
    flips = [f"between steps {f['from_step']} and {f['to_step']} ({f['from']} -> {f['to']})" for f in back]
    note = f"; FLIPPED BACK {', '.join(flips)}" if flips else ""
    if first is None:
        return f"does not hold at the last evaluated checkpoint ({n} evaluated){note}"
    if before is None:
        return f"holds at all {n} evaluated checkpoints (from step {first})"
    return (
        f"began to hold between steps {before} and {first}: not at {before}, and at every evaluated checkpoint "
        f"from {first} on ({n} evaluated; more with --claims){note}"
    )


def phase_text(p: dict, learned: float) -> str:
    """A phase record of ``detect_phases`` in words: its onset and its fit's R^2, or why it has none."""
    before, at = p["onset_interval"]
    if at is None:
        if "series_ends_before" in p:
            end = p["series_ends_before"]
            return (
                f"onset none: not learned by step {end['last_step']}, where the series ends (its curve reaches "
                f"at most {fmt(end['highest'])}; learned at {learned})"
            )
        return f"onset none: its curve does not stay at or above {learned} to the last checkpoint"
    where = f"step {at}" if before is None else f"between steps {before} and {at}"
    if p["coherence_r2"] is None:
        why = "no checkpoint before the onset" if before is None else "a flat curve"
        return f"onset {where}  (no rise to fit: {why})"
    step_r2 = "n/a" if p.get("step_r2") is None else p["step_r2"]
    return f"onset {where}  (monotone-fit R^2 {p['coherence_r2']}, step R^2 {step_r2})"


def not_measured_why(ph: dict, key: str) -> str:
    """Why the assignment spike (``key`` ``"assignment_jump"``) or the restricted-slot refinement
    (``"restricted_refinement"``) of a ``detect_phases`` record has no value: the series ends before a
    phase it compares, one of the two is not a learning curve, or the curve it measures does not rise."""
    earlier, later = ("addition", "assignment") if key == "assignment_jump" else ("assignment", "restricted_slots")
    if open_at_end(ph["phases"], earlier, later):
        return ends_early_text(ph["phases"], (earlier, later), heights=False)
    by_id = {p["id"]: p for p in ph["phases"]}
    if not (by_id[earlier]["coherent"] and by_id[later]["coherent"]):
        return f"{earlier} and {later} are not both learning curves"
    if key == "assignment_jump":
        return "the assignment curve does not rise"
    return "the restricted-slot curve has nothing left to gain at the assignment onset"


def summary_lines(doc: dict) -> list[str]:
    """What ``assignadd-report`` prints under its first line for a series: each phase's onset, the
    assignment spike, the gaps between onsets, the restricted-slot refinement, the series claims' verdicts
    and each per-checkpoint claim's timeline. An item the series could not measure says why."""
    ph, rule = doc["phases"], doc["phases"]["rule"]
    lines = [f"  {p['id']:<17} {phase_text(p, rule['learned'])}" for p in ph["phases"]]

    def window(key: str, share: str) -> str:  # the assignment spike or the restricted-slot refinement
        x = ph[key]
        if x["fraction_interval"][0] is None:
            return f"not measured: {not_measured_why(ph, key)} ({x['state']})"
        return f"{fmt_span(x['fraction_interval'], '-')} {share.format(x['width_steps'])} ({x['state']})"

    spike = (
        f"of its rise within {{}} steps after addition is learned, rising at least {rule.get('jump_contrast')}x as "
        f"fast as the {rule.get('jump_flank_steps')} steps on either side"
    )
    lines.append(f"  assignment spike: {window('assignment_jump', spike)}")
    lines += [
        f"  {s['earlier']} -> {s['later']}: {s['gap_steps']} steps between onsets "
        f"({fmt_span(s['gap_interval'], '-')} as the checkpoints place them)"
        for s in ph["separations"]
        if s["gap_steps"] is not None
    ]
    refinement = window("restricted_refinement", "of what remains within {} steps")
    lines.append(f"  restricted-slot refinement: {refinement}")
    lines += [f"  {cid}: {r['verdict']} ({r['reason']})" for cid, r in doc["series_claims"].items()]
    lines += [f"  {cid}: {timeline_text(t)}" for cid, t in doc["verdict_timeline"].items()]
    return lines


def to_json(doc: dict) -> str:
    """Deterministic text: sorted keys, fixed rounding done upstream, a trailing newline."""
    return json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"


def to_csv(doc: dict) -> str:
    """Long form: one row per (step, measure)."""
    lines = ["step,measure,value"]
    for c in doc["checkpoints"]:
        for k, v in sorted(c["values"].items()):
            lines.append(f"{c['step']},{k},{'' if v is None else repr(float(v))}")
    return "\n".join(lines) + "\n"
