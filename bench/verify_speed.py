"""How long `assignadd-verify` takes end to end (start-up included), and where the time goes.

    python bench/verify_speed.py [CHECKPOINT] [--n 2000] [--only ID,...] [--runs 1] [--budget 30]

Runs the installed command exactly as a researcher would (``--out`` into a temporary folder, so the
figures and every report are included), times the whole process, and splits the time with the
command's own timings.json: start-up (interpreter + imports), checkpoint loading, each claim,
figures and report writing. The issue's budget: all claims + reports under 30 s on a CPU.

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


def run_once(args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="verify-speed-")) / "report"
    argv = (
        command() + ([args.checkpoint] if args.checkpoint else []) + ["--out", str(out), "--quiet", "--n", str(args.n)]
    )
    if args.only:
        argv += ["--only", args.only]
    if args.jobs is not None:
        argv += ["--jobs", str(args.jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        if p.returncode not in (0, 1):
            sys.exit(f"assignadd-verify exited {p.returncode}: {p.stderr.strip()}")
        timings = json.loads((out / "timings.json").read_text())
        passed = p.stdout.strip().splitlines()[-1]
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "timings": timings, "passed": passed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", nargs="?", help="checkpoint (default: the bundled reference)")
    ap.add_argument("--n", type=int, default=2000, help="pool size (default 2000, as the command)")
    ap.add_argument("--only", help="comma-separated claim ids")
    ap.add_argument("--jobs", type=int, default=None, help="passed to assignadd-verify (default: its own)")
    ap.add_argument("--runs", type=int, default=1, help="repeat and report the fastest (default 1)")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds allowed end to end (default 30)")
    args = ap.parse_args(argv)

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
