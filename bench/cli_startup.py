"""How fast each command answers bad input: a bad flag, a missing path, a folder, an empty file, a text file.

    python bench/cli_startup.py [--runs 5] [--against GIT_REF] [--only verify,report,...]

Runs each command as a user would, a fresh process each time (``python -m assignadd.<module>``, the
console scripts' code), on the bad inputs of tests/test_cli_errors.py, plus a run folder given as a
checkpoint and an option value out of range, and prints the median wall time of ``--runs`` runs per
case with the machine (CPU model, cores) and the load average before and after. Each case should exit 2
with one line on stderr; the table says when one does not. The aim: under 1 s each on an idle machine,
where the answer comes before torch is imported (about 7 s of a 2-core VM's time when it is).

``--against GIT_REF``: the same cases on a checkout of an earlier commit (cloned into a temporary folder
and put first on ``PYTHONPATH``, in this environment), alternating with this checkout's, case by case:
before and after on the same machine under the same load.

Wall time on a shared machine depends on what else runs: read the load average beside it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = {
    "verify": "assignadd.reports.verify_cli",
    "mutants": "assignadd.reports.mutants_cli",
    "report": "assignadd.reports.report_cli",
    "train": "assignadd.training.train_cli",
    "sweep": "assignadd.training.sweep_cli",
}
# Options that keep a case short should a command ever accept it (fp32: no precision timing).
TRAIN = ["--steps", "1", "--eval-size", "8", "--precision", "fp32", "--quiet"]
SWEEP = ["--param", "f", "--values", "0.5", *TRAIN]
# (command, case, argv); {out} is where the command would write. Train and sweep create their folder, so
# there a missing path is one under a file and the folder one that holds something else.
CASES = [
    ("verify", "bad flag", ["--bogus", "--out", "{out}"]),
    ("verify", "missing path", ["missing.pt", "--out", "{out}"]),
    ("verify", "folder", ["folder", "--out", "{out}"]),
    ("verify", "empty file", ["empty.pt", "--out", "{out}"]),
    ("verify", "text file", ["notes.txt", "--out", "{out}"]),
    ("verify", "run folder", ["run1", "--out", "{out}"]),
    ("verify", "bad value", ["--n", "0", "--out", "{out}"]),
    ("mutants", "bad flag", ["--bogus", "--json", "{out}/m.json"]),
    ("mutants", "missing path", ["missing.pt", "--json", "{out}/m.json"]),
    ("mutants", "folder", ["folder", "--json", "{out}/m.json"]),
    ("mutants", "empty file", ["empty.pt", "--json", "{out}/m.json"]),
    ("mutants", "text file", ["notes.txt", "--json", "{out}/m.json"]),
    ("mutants", "run folder", ["run1", "--json", "{out}/m.json"]),
    ("mutants", "bad value", ["--n", "5", "--json", "{out}/m.json"]),
    ("report", "bad flag", ["folder", "--bogus", "--out", "{out}"]),
    ("report", "missing path", ["missing.pt", "--out", "{out}"]),
    ("report", "folder", ["folder", "--out", "{out}"]),
    ("report", "empty file", ["empty.pt", "--out", "{out}"]),
    ("report", "text file", ["notes.txt", "--out", "{out}"]),
    ("report", "bad value", ["run1", "--every", "0", "--out", "{out}"]),
    ("train", "bad flag", ["{out}", "--bogus", *TRAIN]),
    ("train", "missing path", ["notes.txt/run", *TRAIN]),
    ("train", "folder", ["badrun", *TRAIN]),
    ("train", "empty file", ["empty.pt", *TRAIN]),
    ("train", "text file", ["notes.txt", *TRAIN]),
    ("train", "bad value", ["{out}", *TRAIN, "--steps", "0"]),
    ("sweep", "bad flag", [*SWEEP, "--bogus", "--out", "{out}"]),
    ("sweep", "missing path", [*SWEEP, "--out", "notes.txt/sweep"]),
    ("sweep", "folder", [*SWEEP, "--out", "folder"]),
    ("sweep", "empty file", [*SWEEP, "--out", "empty.pt"]),
    ("sweep", "text file", [*SWEEP, "--out", "notes.txt"]),
    ("sweep", "bad value", [*SWEEP, "--steps", "0", "--out", "{out}"]),
]


def make_inputs(root: Path) -> None:
    """The bad inputs, in ``root``."""
    (root / "empty.pt").write_bytes(b"")
    (root / "notes.txt").write_text("a note, not a checkpoint\n")
    (root / "folder").mkdir()
    (root / "folder" / "readme.txt").write_text("nothing to read here\n")
    (root / "run1").mkdir()
    (root / "run1" / "final.pt").write_bytes(b"")
    (root / "badrun").mkdir()
    (root / "badrun" / "run.json").write_text("not JSON\n")


def cpu_name() -> str:
    """The CPU's model name (``lscpu``, else ``/proc/cpuinfo``), else the platform's."""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                return value.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_case(command: str, argv: list[str], root: Path, env: dict | None) -> dict:
    """One run of a case in a fresh process, in ``root``: wall seconds, exit status, stderr's lines."""
    out = root / "out"
    full = [sys.executable, "-m", MODULES[command], *[a.replace("{out}", str(out)) for a in argv]]
    t0 = time.perf_counter()
    p = subprocess.run(
        full, cwd=root, capture_output=True, text=True, timeout=600, env=None if env is None else {**os.environ, **env}
    )
    wall = time.perf_counter() - t0
    wrote = out.exists()
    if wrote:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    return {"wall": wall, "rc": p.returncode, "lines": p.stderr.splitlines(), "wrote": wrote}


def verdict(r: dict) -> str:
    """``ok`` for exit 2, one stderr line and nothing written; else what differs."""
    bad = []
    if r["rc"] != 2:
        bad.append(f"exit {r['rc']}")
    if len(r["lines"]) != 1:
        bad.append(f"{len(r['lines'])} lines")
    if r["wrote"]:
        bad.append("wrote --out")
    return "ok" if not bad else ", ".join(bad)


def clone(ref: str, into: Path) -> Path:
    """A checkout of ``ref`` as ``into/assignadd``; returns ``into`` (for ``PYTHONPATH``)."""
    checkout = into / "assignadd"
    for git in (["clone", "-q", "--shared", str(ROOT), str(checkout)], ["-C", str(checkout), "checkout", "-q", ref]):
        p = subprocess.run(["git", *git], capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"git {' '.join(git[:2])}: {p.stderr.strip()}")
    return into


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per case; the median is shown (default 5)")
    ap.add_argument("--against", metavar="GIT_REF", help="also time an earlier commit's commands, alternating")
    ap.add_argument("--only", metavar="CMD,...", help=f"commands to time (default all: {','.join(MODULES)})")
    args = ap.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(MODULES)
    cases = [c for c in CASES if c[0] in chosen]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        modes = {"this checkout": None}
        if args.against:
            modes = {args.against: {"PYTHONPATH": str(clone(args.against, Path(tmp) / "base"))}, **modes}
        results = {}
        for command, case, case_argv in cases:
            for mode, env in modes.items():
                results[command, case, mode] = []
            for _ in range(args.runs):
                for mode, env in modes.items():
                    root = Path(tmp) / "inputs"
                    if not root.exists():
                        root.mkdir()
                        make_inputs(root)
                    results[command, case, mode].append(run_case(command, case_argv, root, env))
    load_after = os.getloadavg()

    print(
        f"bad input, median of {args.runs} fresh processes per case; {cpu_name()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})"
    )
    names = list(modes)
    head = (
        f"{'command':8s} {'case':13s} " + " ".join(f"{m[:16]:>16s}" for m in names) + "  check  stderr (this checkout)"
    )
    print(head)
    print("-" * len(head))
    for command, case, _ in cases:
        cells, checks = [], []
        for mode in names:
            rs = results[command, case, mode]
            cells.append(f"{statistics.median(r['wall'] for r in rs):15.2f}s")
            checks.append(verdict(rs[-1]))
        last = results[command, case, names[-1]][-1]
        line = last["lines"][0] if last["lines"] else ""
        print(f"{command:8s} {case:13s} " + " ".join(cells) + f"  {' / '.join(checks)}  {line[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
