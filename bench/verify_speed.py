"""How long `assignadd-verify` takes end to end (start-up included), and where the time goes.

    python bench/verify_speed.py [CHECKPOINT] [--n 2000] [--only ID,...] [--runs 1] [--budget 30]
    python bench/verify_speed.py --against GIT_REF [--runs 3]
    python bench/verify_speed.py --compare-figures [--runs 3]

Runs the installed command exactly as a researcher would (``--out`` into a temporary folder, so the
figures and every report are included), times the whole process, and splits the time with the
command's own timings.json: start-up (interpreter + imports), checkpoint loading, each claim,
figures and report writing. The issue's budget: all claims + reports under 30 s on a CPU.

``--against GIT_REF``: the same command from a checkout of an earlier commit (cloned into a temporary
folder and run as ``python -m assignadd.reports.verify_cli`` with it first on ``PYTHONPATH``, in this
environment) against this checkout's, alternating, ``--runs`` each: what the commits since cost or
bought on this machine today, whatever its speed, and whether they changed the report's bytes.

``--compare-figures``: the command with ``--out`` (every report file and figure: the baseline) against
the same command with ``--json`` alone (report.json, no figures, as a CI job might run it), alternating:
what drawing the figures costs, and that report.json is the same either way.

Wall time on a shared machine depends on what else runs; the CPU time of the command and the load
average are printed beside it so a slow figure can be read for what it is.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def command() -> list[str]:
    exe = Path(sys.executable).with_name("assignadd-verify")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "assignadd.reports.verify_cli"]


def run_once(args, env: dict | None = None, cmd: list[str] | None = None, figures: bool = True) -> dict:
    """One run of the command: ``--out`` into a temporary folder, or with ``figures=False`` ``--json`` alone."""
    out = Path(tempfile.mkdtemp(prefix="verify-speed-")) / "report"
    where = ["--out", str(out)] if figures else ["--json", str(out / "report.json")]
    if not figures:
        out.mkdir()
    argv = (cmd or command()) + ([args.checkpoint] if args.checkpoint else []) + [*where, "--quiet", "--n", str(args.n)]
    if args.only:
        argv += ["--only", args.only]
    if args.jobs is not None:
        argv += ["--jobs", str(args.jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=None if env is None else {**os.environ, **env})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        if p.returncode not in (0, 1):
            sys.exit(f"assignadd-verify exited {p.returncode}: {p.stderr.strip()}")
        timings = json.loads((out / "timings.json").read_text()) if figures else None
        passed = p.stdout.strip().splitlines()[-1]
        report = (out / "report.json").read_bytes()
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall": wall,
        "cpu": cpu,
        "sys": after.ru_stime - before.ru_stime,
        "minflt": after.ru_minflt - before.ru_minflt,
        "timings": timings,
        "passed": passed,
        "report": report,
    }


def compare_figures(args) -> int:
    """``--out`` (figures drawn) against ``--json`` alone, alternating, ``--runs`` each."""
    return compare(
        args, {"--out, with figures (baseline)": (None, {}), "--json alone, no figures": (None, {}, False)}, "output"
    )


def compare_against(args) -> int:
    """This checkout's command against an earlier commit's, alternating, ``--runs`` each."""
    root = Path(__file__).resolve().parents[1]
    # one checkpoint path for both (the report records it; each checkout's default would differ)
    args.checkpoint = args.checkpoint or str(root / "checkpoints" / "reference.pt")
    with tempfile.TemporaryDirectory(prefix="verify-against-") as tmp:
        checkout = Path(tmp) / "assignadd"
        for git in (
            ["clone", "-q", "--shared", str(root), str(checkout)],
            ["-C", str(checkout), "checkout", "-q", args.against],
        ):
            p = subprocess.run(["git", *git], capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"git {' '.join(git[:2])}: {p.stderr.strip()}")
        module = [sys.executable, "-m", "assignadd.reports.verify_cli"]
        modes = {f"{args.against} (baseline)": (module, {"PYTHONPATH": tmp}), "this checkout": (module, {})}
        return compare(args, modes, "code")


def compare(args, modes: dict, what: str) -> int:
    """Each mode {name: (command or None, environment[, figures])} ``--runs`` times, alternating; best of each, ratios
    of the first (the baseline) to the second, and whether report.json was byte-identical in every run."""
    from assignadd.training.precision import cpu_name

    load = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.runs):
        for mode, (cmd, env, *figures) in modes.items():
            runs[mode].append(run_once(args, env, cmd, *figures))
    print(
        f"assignadd-verify {args.checkpoint or '(bundled reference)'} --n {args.n}, {args.runs} run(s) each, "
        f"alternating; {cpu_name()}, {os.cpu_count()} cores; load average before: {load:.2f}"
    )
    width = max(len(m) for m in modes) + 2
    print(f"{what:{width}s} {'wall (best)':>11s} {'CPU (best)':>10s} {'of it kernel':>12s} {'minor faults':>12s}")
    best = {}
    for mode, rs in runs.items():
        best[mode] = {k: min(r[k] for r in rs) for k in ("wall", "cpu", "sys", "minflt")}
        b = best[mode]
        print(f"{mode:{width}s} {b['wall']:10.2f}s {b['cpu']:9.2f}s {b['sys']:11.2f}s {b['minflt']:12,d}")
    base, new = (best[m] for m in modes)
    same = len({r["report"] for rs in runs.values() for r in rs}) == 1
    print(
        f"ratio baseline / new: wall {base['wall'] / new['wall']:.2f}x, CPU {base['cpu'] / new['cpu']:.2f}x, "
        f"kernel {base['sys'] / max(new['sys'], 1e-9):.2f}x; report.json identical in every run: {'yes' if same else 'NO'}"
    )
    return 0 if same else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", nargs="?", help="checkpoint (default: the bundled reference)")
    ap.add_argument("--n", type=int, default=2000, help="pool size (default 2000, as the command)")
    ap.add_argument("--only", help="comma-separated claim ids")
    ap.add_argument("--jobs", type=int, default=None, help="passed to assignadd-verify (default: its own)")
    ap.add_argument("--runs", type=int, default=1, help="repeat and report the fastest (default 1)")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds allowed end to end (default 30)")
    ap.add_argument("--against", metavar="GIT_REF", help="this checkout against an earlier commit's, alternating")
    ap.add_argument(
        "--compare-figures", action="store_true", help="--out (figures drawn) against --json alone, alternating"
    )
    args = ap.parse_args(argv)
    if args.compare_figures:
        return compare_figures(args)
    if args.against:
        return compare_against(args)

    load = os.getloadavg()[0]
    results = [run_once(args) for _ in range(args.runs)]
    best = min(results, key=lambda r: r["wall"])
    t = best["timings"]
    total_inside = t["total_seconds"]
    rows = [
        ("start-up (interpreter, imports)", best["wall"] - total_inside),
        ("load checkpoint + task", t["load_seconds"]),
    ]
    jobs = t.get("jobs", 1)
    if jobs > 1:  # claims overlap in workers: the phase's wall time is the row; each claim's is shown inside it
        rows.append((f"claims, {jobs} workers side by side (wall)", t["claims_wall_seconds"]))
        rows += [(f"  claim {cid} (in its worker)", None) for cid in t["claims"]]
    else:
        rows += [(f"claim {cid}", s) for cid, s in t["claims"].items()]
    # Figures are drawn on a worker thread during the claims; this row is what they add afterwards.
    rows.append(("figures (after the claims)", t.get("figures_wait_seconds", t.get("figures_seconds", 0.0))))
    accounted = sum(s for _, s in rows if s is not None)
    rows.append(("reports, other", best["wall"] - accounted))
    width = max(len(name) for name, _ in rows)
    print(
        f"assignadd-verify {args.checkpoint or '(bundled reference)'} --n {args.n}"
        f"{' --only ' + args.only if args.only else ''}: {best['passed']}"
    )
    print(f"{'part'.ljust(width)}  seconds   share")
    for name, s in rows:
        if s is None:  # a claim inside the side-by-side phase: its own seconds, not a share of the total
            print(f"{name.ljust(width)}  {t['claims'][name.split()[1]]:7.2f}      -")
        else:
            print(f"{name.ljust(width)}  {s:7.2f}  {100 * s / best['wall']:5.1f}%")
    print(f"{'total (wall, end to end)'.ljust(width)}  {best['wall']:7.2f}  100.0%")
    print(
        f"CPU time of the command: {best['cpu']:.2f} s on {os.cpu_count()} cores; "
        f"load average before the run: {load:.2f}"
    )
    ok = best["wall"] <= args.budget
    print(
        f"{'within' if ok else 'OVER'} the {args.budget:g} s budget"
        + ("" if ok or load < (os.cpu_count() or 1) else " (the machine was busy: see the load average)")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
