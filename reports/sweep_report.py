"""``assignadd-report SWEEP_DIR``: a data-requirement sweep into accuracy-against-f (or r) curves, the
threshold, and the ``data_requirements`` verdict (SPEC §4.5).

``SWEEP_DIR`` is a sweep folder of ``assignadd-sweep`` (it holds ``sweep.json``), or a folder whose
sub-folders are sweep folders (an f sweep and an r sweep side by side: one report, both halves of the
claim). Writes sweep.json (schema ``assignadd.sweep/1``, byte-identical for the same folders), sweep.csv
and sweep.html; exit status as for a series (docs/dynamics.md), the rule in docs/sweeps.md.

``rescore_report(sweep.json)`` applies the current rule to the points of a report written earlier (the
shipped ``docs/sweep_results/sweep.json``, whose sweep folders and weights are not shipped).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from dataclasses import fields
from pathlib import Path

from ..cli_util import exit_bad_input
from ..fileio import atomic_write_files, sha256_file
from . import html as H
from . import series_html
from .png import PAGE_DPI, png_bytes, pyplot
from .render import fmt, fmt_measurement, meta_p, num, page_head

SCHEMA = "assignadd.sweep/1"
CSV_FIELDS = (
    *("param", "point", "value", "seed", "f", "r"),  # the point
    *("metric", "accuracy", "ci_low", "ci_high", "n", "sample", "generalizes", "status"),  # its measurement
    *("steps_trained", "stopped_early", "final_sha256", "train_wall_s"),  # its training
)
CSV_KEYS = {"point": "name", "ci_low": "low", "ci_high": "high"}  # a column's key in a point where it differs


class SweepReportError(ValueError):
    """A path that is not a sweep folder, nor a folder of them."""


def is_sweep_folder(path) -> bool:
    """True when ``path`` is a sweep folder or holds sweep folders (for ``assignadd-report`` to dispatch)."""
    return bool(find_sweeps(path, strict=False))


def find_sweeps(path, strict: bool = True) -> list[Path]:
    path = Path(path)
    if (path / "sweep.json").is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if (p / "sweep.json").is_file()) if path.is_dir() else []
    if not found and strict:
        raise SweepReportError(f"{path}: not a sweep folder (no sweep.json in it or in its sub-folders)")
    return found


def _training_summary(point_dir: Path, steps: int) -> dict:
    """Steps trained, whether early stopping ended the point, and its last pool accuracies."""
    log = point_dir / "metrics.jsonl"
    last, wall, segment = None, 0.0, None
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                last = json.loads(line)
            except json.JSONDecodeError:
                continue
            w = last.get("wall_s")
            if isinstance(w, (int, float)):
                if segment is not None and w < segment:  # a resumed run restarts its clock
                    wall += segment
                segment = w
    done = (point_dir / "final.pt").exists()
    step = last["step"] if last else None
    return {
        # the run's cost: training wall seconds as logged, the segments of a resumed point summed (steps
        # lost to an interruption and redone are counted once); on a shared machine, not a benchmark
        "train_wall_s": round(wall + segment, 1) if segment is not None else None,
        "steps_trained": step,
        "finished": done,
        "stopped_early": bool(done and step is not None and step < steps),
        "final_pools": last["accuracy"] if last else None,
        # what re-scores the verdict: the exact weights the point's metric was measured on
        "final_sha256": sha256_file(point_dir / "final.pt") if done else None,
    }


def compute_sweep_report(path, *, progress: bool = False) -> dict:
    """The ``assignadd.sweep/1`` document for a sweep folder (or a folder of sweep folders), each r point
    scored on the claim's subsample of the 2-var union (``UNION_SAMPLE`` sequences)."""
    from ..hypotheses import data_requirements as dr
    from ..training.sweep_folder import points_dir

    folders = find_sweeps(path)
    sweeps, by_param = [], {}
    for folder in folders:

        def note(r, folder=folder):
            if progress:
                acc = "unfinished" if r.accuracy is None else f"{r.accuracy:.4f}"
                print(f"  {folder.name}/{r.name}: {r.metric} {acc}", file=sys.stderr)

        try:
            grid_doc, results = dr.sweep_results(folder, progress=note)
        except Exception as e:
            raise SweepReportError(f"{folder}: {e}") from None
        param = grid_doc["grid"]["param"]
        if param in by_param:
            raise SweepReportError(f"{path}: two {param} sweeps; give one sweep per parameter")
        by_param[param] = results
        try:
            threshold = dr.estimate_threshold(results)
        except dr.SweepDataError as e:
            threshold = {"error": str(e)}
        steps = grid_doc["grid"]["steps"]
        points = [{**r.to_dict(), **_training_summary(points_dir(folder) / r.name, steps)} for r in results]
        sweeps.append(
            {
                "folder": folder.name if folder != Path(path) else ".",
                "param": param,
                "grid": grid_doc["grid"],
                "points": points,
                "threshold": threshold,
            }
        )
    claim = dr.DataRequirements().run_results(by_param).to_dict()
    return {
        "schema": SCHEMA,
        "rule": {
            "version": dr.RULE_VERSION,
            "generalizes": dr.GENERALIZES,
            "band": {p: list(b) for p, b in dr.BAND.items()},
            "band_half_width": dr.BAND_HALF_WIDTH,
            "paper": dr.PAPER,
            "metrics": dr.METRICS,
            "union_sample": dr.UNION_SAMPLE,
            "preregistered_grid": {p: list(v) for p, v in dr.PREREGISTERED_GRID.items()},
        },
        "sweeps": sweeps,
        "claim": claim,
    }


def results_from_report(doc: dict) -> dict:
    """``{param: [PointResult, ...]}`` from an ``assignadd.sweep/1`` document's points."""
    from ..hypotheses import data_requirements as dr

    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise SweepReportError(f"not an {SCHEMA} document")
    names = [f.name for f in fields(dr.PointResult)]
    return {sw["param"]: [dr.PointResult(**{k: p[k] for k in names}) for p in sw["points"]] for sw in doc["sweeps"]}


def rescore_report(path):
    """``data_requirements`` decided by the current rule on the points of a sweep report (sweep.json)."""
    from ..hypotheses import data_requirements as dr

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SweepReportError(f"{path}: cannot read it ({type(e).__name__}: {e})") from None
    return dr.DataRequirements().run_results(results_from_report(doc))


def to_json(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"


def to_csv(doc: dict) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for s in doc["sweeps"]:
        for p in s["points"]:
            w.writerow({"param": s["param"], **{f: p.get(CSV_KEYS.get(f, f)) for f in CSV_FIELDS[1:]}})
    return buf.getvalue()


def sweep_figure(doc: dict, sweep: dict) -> bytes:
    """Accuracy against the swept parameter, one line per seed; the bar, the band, the paper's value and
    the estimated threshold marked. Returns PNG bytes."""
    plt = pyplot()
    param, rule = sweep["param"], doc["rule"]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    band = rule["band"][param]
    ax.axvspan(band[0], band[1], color="tab:green", alpha=0.12, label=f"pass band {band[0]}-{band[1]}")
    ax.axhline(rule["generalizes"], color="grey", ls=":", lw=1, label=f"generalizes: acc >= {rule['generalizes']}")
    ax.axvline(rule["paper"][param], color="black", ls=":", lw=1, label=f"paper: {param} ≈ {rule['paper'][param]}")
    for seed in sorted({p["seed"] for p in sweep["points"]}):
        pts = sorted((p for p in sweep["points"] if p["seed"] == seed), key=lambda p: p["value"])
        xs = [p["value"] for p in pts if p["accuracy"] is not None]
        ys = [p["accuracy"] for p in pts if p["accuracy"] is not None]
        ax.plot(xs, ys, marker="o", lw=1.4, label=f"seed {seed}")
    th = sweep["threshold"]
    if th.get("low") is not None:
        ax.axvline(th["median"], color="tab:red", ls="--", lw=1.5, label=f"threshold θ = {th['median']:.3g}")
        if th["high"] > th["low"]:
            ax.axvspan(th["low"], th["high"], color="tab:red", alpha=0.12, label="θ over seeds")
    metric = doc["rule"]["metrics"][param]
    ax.set_xlabel({"f": "f: fraction of number pairs in training", "r": "r: keep-probability of 2-var rows"}[param])
    ax.set_ylabel(f"accuracy ({metric})")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"Accuracy against {param}")
    return png_bytes(fig, dpi=PAGE_DPI, tight=True)


def _word(x) -> str:
    """A point's cell: yes/no for a flag, an em dash for nothing, numbers as the verify report writes them."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    return fmt(x) if isinstance(x, (int, float)) else str(x)


def _point_accuracy(q: dict) -> str:
    """``accuracy [95% CI]`` as the verify report writes a measurement (``render.fmt_measurement``)."""
    if q["accuracy"] is None:
        return "not finished"
    return fmt_measurement({"value": q["accuracy"], "ci": [q["low"], q["high"]]})


def _sweep_section(doc: dict, s: dict, png: bytes | None) -> list:
    p, grid = s["param"], s["grid"]
    fixed = ", ".join(f"{k} = {v}" for k, v in grid["fixed"].items())
    early_stop = H.tag("code", json.dumps(grid["early_stop"]))
    out = [
        H.tag("h2", f"Sweep over {p} (", H.tag("code", s["folder"]), ")", id=f"sweep-{p}"),
        meta_p(f"{fixed}; seeds {grid['seeds']}; up to {grid['steps']} steps; early stop: ", early_stop),
    ]
    if "error" in s["threshold"]:
        out.append(H.tag("p", H.verdict("error"), " ", s["threshold"]["error"]))
    caption = (
        f"{doc['rule']['metrics'][p]} accuracy of each point's final.pt against {p}, one line per seed; green: "
        f"the pass band; dotted: the bar ({doc['rule']['generalizes']}) and the paper's value; red dashed: "
        "the estimated threshold θ (shaded: its range over seeds)"
    )
    out.append(H.figure(f"sweep-{p}", f"Accuracy against {p}", caption, png))
    rows = [
        [
            H.breakable(q["name"]),
            num(_point_accuracy(q)),
            num(_word(q["n"])),
            _word(q.get("status") or q["generalizes"]),
            num(_word(q["steps_trained"])),
            _word(q["stopped_early"]),
            num("–" if q.get("train_wall_s") is None else f"{q['train_wall_s'] / 60:.0f} min"),
        ]
        for q in s["points"]
    ]
    header = ["point", "accuracy [95% CI]", "n", "generalizes", "steps", "early stop", "training (wall)"]
    out.append(H.table(header, rows, cell_classes=["text"] + ["nowrap"] * 6))
    walls = [q["train_wall_s"] for q in s["points"] if q.get("train_wall_s") is not None]
    if walls:
        out.append(
            meta_p(
                f"Cost: {sum(walls) / 3600:.1f} h of training wall time over {len(walls)} points (each point "
                "one process of one torch thread; points ran side by side, so the sweep's own wall time is "
                "shorter; a machine shared with other work makes these figures high)."
            )
        )
    return out


def _points(doc: dict) -> int:
    return sum(len(s["points"]) for s in doc["sweeps"])


def render_html(doc: dict, figures: dict[str, bytes] | None = None) -> str:
    """``sweep.html`` from an ``assignadd.sweep/1`` document (``reports/html.py``'s template, the evidence
    table of the series page); ``figures``: PNG bytes per swept parameter (drawn here when missing)."""
    from ..hypotheses.data_requirements import SWEEP_RULE

    def status(e: dict, m: dict) -> str:  # the claim's own rule (``SWEEP_RULE``) on the item's JSON
        t, open_low = e["threshold"], bool((m.get("extra") or {}).get("open_low"))
        return SWEEP_RULE.state(t["direction"], t["value"], m["ci"][0], m["ci"][1], open_low)

    claim, rule = doc["claim"], doc["rule"]
    folders = H.join([H.tag("code", s["folder"]) for s in doc["sweeps"]], ", ")
    sweeps = f"{_points(doc)} points in {len(doc['sweeps'])} sweep(s): "
    about = [[sweeps, folders, f"; rule version {rule.get('version', 1)}; "]]
    body = page_head("Data requirements (SPEC §4.5)", about, doc["schema"]) + [
        H.tag("p", H.breakable(claim["claim"]), " ", H.verdict(claim["verdict"]), class_="summary"),
        H.tag(
            "p",
            f"A point generalizes when the lower 95% bound of its accuracy is ≥ {rule['generalizes']}, does "
            "not when the upper bound is below it. Per seed the grid brackets the threshold: (b, θ], θ the "
            "smallest grid value from which every larger value generalizes, b the largest value below it "
            "that does not. An item passes when the bracket lies on the band's side of its edge, fails when "
            "it lies beyond it, and is inconclusive when it straddles it (and so is the claim). Rule and "
            "band: ",
            H.tag("code", "assignadd/hypotheses/data_requirements.py"),
            ", docs/sweeps.md.",
        ),
        series_html.claim_section(claim, status),
    ]
    for s in doc["sweeps"]:
        body += _sweep_section(doc, s, (figures or {}).get(s["param"]) or sweep_figure(doc, s))
    return H.page("assignadd sweep report: data_requirements", *body)


def main_for_sweep(path, out, *, quiet: bool = False) -> int:
    """What ``assignadd-report SWEEP_DIR [--out OUT]`` runs: writes sweep.json/.csv/.html and one
    ``sweep_<param>.png`` per swept parameter into the folder ``out``; bad input exits 2 with one
    ``error:`` line."""
    path, out = Path(path), Path(out)
    try:
        sweeps = find_sweeps(path)
    except (SweepReportError, OSError) as e:
        exit_bad_input(str(e))
    if any(out.resolve() == s.resolve() for s in sweeps):
        exit_bad_input(f"{out}: is the sweep folder itself (its sweep.json is the grid); choose another --out")
    t0 = time.perf_counter()
    try:
        doc = compute_sweep_report(path, progress=not quiet)
    except SweepReportError as e:
        exit_bad_input(str(e))
    figures = {sw["param"]: sweep_figure(doc, sw) for sw in doc["sweeps"]}
    files: dict[str, str | bytes] = {
        "sweep.json": to_json(doc),
        "sweep.csv": to_csv(doc),
        "sweep.html": render_html(doc, figures),
    }
    files.update({f"sweep_{param}.png": png for param, png in figures.items()})
    atomic_write_files(out, files)
    if not quiet:
        print(f"{_points(doc)} points in {time.perf_counter() - t0:.1f} s -> {out}")
        for s in doc["sweeps"]:
            th = s["threshold"]
            if "error" in th:
                print(f"  {s['param']}: {th['error']}")
            else:
                print(f"  {s['param']}: threshold {th['median']} (seeds: {th['low']}-{th['high']})")
        print(f"  data_requirements: {doc['claim']['verdict']} ({doc['claim']['reason']})")
    return 0 if doc["claim"]["verdict"] == "pass" else 1
