"""What each speed saving of the claims' code buys, alone, end to end and on the claims' CPU.

    python bench/savings.py [--at 050d709] [--rounds 3] [--modes shipped,table,...] [--no-claims]

The savings were measured at a commit that still had them, each behind a switch: Layer 1's q/k/v
table (``model.transformer.EMBEDDING_TABLE``), served attention (``engine.SERVE_CLEAN_ATTENTION``), the
memo of clean forwards (``interventions.reuse_clean_forwards``, which served attention lives in),
clean forwards in pieces of 512 sequences (``engine.CLEAN_CHUNK``), and the commands' allocator switch
(``ASSIGNADD_ALLOCATOR=system``). ``--at`` is cloned into a temporary folder and run from there; each
mode turns one saving off (``all``: the five together) against that commit as shipped, and
``checkout`` is this working tree's code. Two measurements per mode, in one run, modes alternating
round by round so each sees the same load:

* end to end: ``assignadd-verify --json`` on the bundled reference, default flags (both cores: the
  claims in forked workers), wall and CPU seconds of the whole command;
* the claims' CPU: every claim at n = 2000 in one process with one torch thread, CPU seconds (not
  for ``allocator``: only the commands switch the allocator).

Prints every run, then the best of each mode and the ratio of the mode's time to the first mode's
(above 1.00x: the mode is slower; for a saving turned off, that is what the saving buys), and whether
report.json and every claim's result were identical in every run. On a machine shared with other work
the wall column moves with the load between runs; the CPU columns move less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "checkpoints" / "reference.pt"
MODES = ("shipped", "table", "served", "memo", "pieces", "allocator", "all", "checkout")
OFF = {"all": "table,served,memo,pieces,allocator", "shipped": "", "checkout": ""}

# Run inside the child: turn the named savings off, then either the command or the claims.
DRIVER = r"""
import contextlib, json, os, sys, time
off = set(filter(None, sys.argv[1].split(",")))
if "allocator" in off:
    os.environ["ASSIGNADD_ALLOCATOR"] = "system"
if "table" in off:
    import assignadd.model.transformer as T; T.EMBEDDING_TABLE = False
if off & {"served", "pieces", "memo"}:
    import assignadd.interventions as I, assignadd.interventions.engine as E
    if "served" in off: E.SERVE_CLEAN_ATTENTION = False
    if "pieces" in off: E.CLEAN_CHUNK = 10**9
    if "memo" in off: I.reuse_clean_forwards = contextlib.nullcontext
if sys.argv[2] == "verify":
    from assignadd.reports.verify_cli import main
    sys.argv = ["assignadd-verify", *sys.argv[3:]]
    sys.exit(main())
import torch
from assignadd.hypotheses import REGISTRY, session
torch.set_num_threads(1)
ctx, _, _ = session.load_context(sys.argv[3], seed=0, n=2000, device="cpu")
out = {}
for cid in REGISTRY:
    t0 = time.process_time()
    r, _ = session.run_one(ctx, cid)
    r = r.to_dict() if hasattr(r, "to_dict") else dict(r)  # a ClaimResult here; a dictionary before
    r.pop("seconds", None)
    out[cid] = [time.process_time() - t0, json.dumps(r, sort_keys=True)]
print(json.dumps(out))
"""


def child(src: str, mode: str, what: str, *args: str) -> tuple[subprocess.CompletedProcess, float, float]:
    env = {**os.environ, "PYTHONPATH": src}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", DRIVER, OFF.get(mode, mode), what, *args], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        sys.exit(f"{mode} {what}: exit {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--at", default="050d709", help="the commit whose savings are measured (default 050d709)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, the first is the baseline: {MODES}")
    ap.add_argument("--no-claims", action="store_true", help="end to end only")
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    sys.path.insert(0, str(ROOT.parent))
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    with tempfile.TemporaryDirectory(prefix="savings-") as tmp:
        clone = Path(tmp) / "assignadd"
        for git in (["clone", "-q", "--shared", str(ROOT), str(clone)], ["-C", str(clone), "checkout", "-q", args.at]):
            subprocess.run(["git", *git], check=True, capture_output=True)
        here = Path(tmp) / "here"
        here.mkdir()
        (here / "assignadd").symlink_to(ROOT)
        src = {m: str(here if m == "checkout" else tmp) for m in modes}
        print(
            f"{cpu}, {os.cpu_count()} cores; --at {args.at}; {args.rounds} rounds; load average "
            f"{os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            flush=True,
        )
        e2e = {m: [] for m in modes}
        claims = {m: [] for m in modes}
        reports, results = set(), set()
        for r in range(args.rounds):
            for m in modes if r % 2 == 0 else modes[::-1]:
                out = Path(tmp) / f"{m}-{r}.json"
                _, wall, cpu_s = child(src[m], m, "verify", str(REFERENCE), "--json", str(out), "--quiet")
                reports.add(out.read_bytes())
                e2e[m].append((wall, cpu_s))
                line = f"round {r + 1} {m:10s} end to end {wall:6.2f} s wall {cpu_s:6.2f} s CPU"
                if not args.no_claims and m != "allocator":  # the allocator is the command's switch alone
                    p, _, _ = child(src[m], m, "claims", str(REFERENCE))
                    per = json.loads(p.stdout.strip().splitlines()[-1])
                    results.add(json.dumps({c: v[1] for c, v in per.items()}, sort_keys=True))
                    claims[m].append(sum(v[0] for v in per.values()))
                    line += (
                        f"; claims {claims[m][-1]:6.2f} s CPU ("
                        + ", ".join(f"{c} {v[0]:.2f}" for c, v in per.items())
                        + ")"
                    )
                print(line, flush=True)
    base = modes[0]
    print(f"\nbest of {args.rounds}; ratio = the mode's time / {base}'s (above 1: the mode is slower)")
    print(f"{'mode':10s} {'wall':>7s} {'ratio':>6s} {'CPU':>7s} {'ratio':>6s} {'claims CPU':>10s} {'ratio':>6s}")
    bw, bc = min(w for w, _ in e2e[base]), min(c for _, c in e2e[base])
    bcl = min(claims[base]) if claims[base] else float("nan")
    for m in modes:
        w, c = min(w for w, _ in e2e[m]), min(c for _, c in e2e[m])
        cl = min(claims[m]) if claims[m] else float("nan")  # nan: not measured
        print(f"{m:10s} {w:7.2f} {w / bw:5.2f}x {c:7.2f} {c / bc:5.2f}x {cl:10.2f} {cl / bcl:5.2f}x")
    print(f"report.json identical in every run: {'yes' if len(reports) == 1 else 'NO'}")
    if results:
        print(f"every claim's result identical in every run: {'yes' if len(results) == 1 else 'NO'}")
    return 0 if len(reports) == 1 and len(results) <= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
