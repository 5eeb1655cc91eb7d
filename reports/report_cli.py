"""``assignadd-report PATH``: a checkpoint series into curves, learning phases and per-step verdicts.

Writes ``series.json``, ``series.csv`` and ``series.html`` into ``--out``; a sweep folder is reported
instead as the ``data_requirements`` claim (``reports/sweep_report.py``). Several run folders give each
its series (in a folder of its own) and the series claims across the runs (``reports/population.py``).
Options and exit status: the epilog below and docs/dynamics.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..cli_util import Parser, exit_bad_input, folder_arg_problem
from ..fileio import atomic_write_files, checkpoint_file_problem
from .sweep_report import is_sweep_folder, main_for_sweep

EPILOG = """examples:
  assignadd-report runs/seed42 --out out/seed42 --jobs 2
  assignadd-report path/to/authors_checkpoints --every 4 --n 500
  assignadd-report runs/seed0 runs/seed1 runs/seed2 --out out/seeds   # learning_phases across the runs
exit status:
  0  every claim of the report passes (learning_phases on a series; data_requirements on a sweep)
  1  a claim fails, is inconclusive (the checkpoints or the grid cannot decide it) or is an error;
     the report is still written, and says why
  2  bad input: one "error: ..." line on stderr, nothing written
The phase rule is in assignadd/hypotheses/learning_phases.py and docs/dynamics.md; the sweep rule in
assignadd/hypotheses/data_requirements.py and docs/sweeps.md."""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="assignadd-report",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "path", nargs="+", help="a run folder of assignadd-train, or a folder of checkpoints (either format); several"
    )
    p.add_argument("--out", default=None, help="output folder (default: out/report-<folder name>, or out/report-runs)")
    p.add_argument("--every", type=int, default=1, help="measure every K-th checkpoint (the last always)")
    p.add_argument("--jobs", type=int, default=1, help="processes (1 torch thread each)")
    p.add_argument("--n", type=int, default=1000, help="sequences per pool (default 1000)")
    p.add_argument(
        "--claims",
        type=int,
        default=8,
        help="run every registered claim on this many checkpoints, evenly spread, first and last "
        "included (0: none; default 8; a claim run costs tens of CPU-seconds)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    return p


def _path_problem(path: Path) -> str | None:
    """Why ``path`` cannot be reported, from the file system alone: it is missing, is a file, or holds no
    checkpoint file (``*.pt``, ``*.pth``, in it or in its ``checkpoints`` folder) and no sweep. None when
    it may be a series or a sweep; reading them checks the rest."""
    if not path.exists():
        return f"{path}: no such folder"
    if not path.is_dir():
        hint = f"; for one checkpoint, run: assignadd-verify {path}" if checkpoint_file_problem(path) is None else ""
        return f"{path}: not a folder (expected a run folder or a folder of checkpoints){hint}"
    try:
        if is_sweep_folder(path):
            return None
        folders = [path, *([path / "checkpoints"] if (path / "checkpoints").is_dir() else [])]
        if any(f.suffix in (".pt", ".pth") and f.is_file() for folder in folders for f in folder.iterdir()):
            return None
    except OSError as e:
        return f"{path}: cannot read ({e.strerror or e})"
    return f"{path}: no checkpoints (expected step_NNNNNN.pt, checkpoint_step_N.pth, final.pt or model_state_dict.pth)"


def _check_input(args) -> Path:
    """Exit 2 on a path that cannot be reported, an output that cannot be written or a series option out
    of range, before torch is imported; returns the output folder (absolute). Several paths must each be a
    series (a sweep is reported alone)."""
    for path in map(Path, args.path):
        problem = _path_problem(path)
        if problem is not None:
            exit_bad_input(problem)
        if len(args.path) > 1 and is_sweep_folder(path):
            exit_bad_input(f"{path}: a sweep is reported on its own; several paths must each be a run's series")
    path = Path(args.path[0])
    out = (
        Path(args.out)
        if args.out
        else Path("out") / (f"report-{path.resolve().name}" if len(args.path) == 1 else "report-runs")
    )
    problem = folder_arg_problem(out)
    if problem is not None:
        exit_bad_input(problem)
    if not is_sweep_folder(path):  # the options of a series (a sweep report has none of them)
        for flag, value, least in (("--every", args.every, 1), ("--n", args.n, 10), ("--jobs", args.jobs, 1)):
            if value < least:
                exit_bad_input(f"{flag} must be at least {least}, got {value}")
        if args.claims < 0:
            exit_bad_input(f"--claims must be 0 (none) or positive, got {args.claims}")
    return out.resolve()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = _check_input(args)
    if len(args.path) == 1 and is_sweep_folder(args.path[0]):  # made by assignadd-sweep (or an f and an r sweep)
        return main_for_sweep(args.path[0], out, quiet=args.quiet)
    from . import population
    from .series import SeriesError, compute_series, summary_lines, to_csv, to_json
    from .series_html import render_html

    t0, docs, files = time.perf_counter(), [], {}
    labels = population.model_labels(args.path) if len(args.path) > 1 else [""]
    for path, label in zip(args.path, labels):
        if label and not args.quiet:
            print(f"run {len(docs) + 1}/{len(args.path)}: {path}", file=sys.stderr, flush=True)
        try:
            doc = compute_series(
                path, every=args.every, jobs=args.jobs, n=args.n, claims=args.claims, progress=not args.quiet
            )
        except SeriesError as e:
            exit_bad_input(str(e))
        except KeyboardInterrupt:
            print("interrupted: nothing written", file=sys.stderr)
            return 130
        docs.append(doc)
        where = f"{label.replace('/', '-')}/" if label else ""
        files |= {
            where + "series.json": to_json(doc),
            where + "series.csv": to_csv(doc),
            where + "series.html": render_html(doc),
        }
    if len(docs) > 1:
        summary = population.series_summary(docs, labels)
        files |= population.population_files(summary)
    atomic_write_files(out, files)
    if not args.quiet and len(docs) == 1:
        print(f"{len(doc['checkpoints'])} checkpoints in {time.perf_counter() - t0:.1f} s -> {out / 'series.html'}")
        print("\n".join(summary_lines(doc)))
    if len(docs) > 1:
        if not args.quiet:
            print(
                f"{len(docs)} runs in {time.perf_counter() - t0:.1f} s -> {out / 'population.html'} (and each run's series)"
            )
        sys.stdout.write(population.terminal_table(summary))
        return 0 if summary["summary"]["all_passed"] else 1
    return 0 if all(r["verdict"] == "pass" for r in doc["series_claims"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
