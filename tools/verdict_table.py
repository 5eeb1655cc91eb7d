"""Run every per-checkpoint claim on finished runs and print a verdict table (claims x runs) in Markdown.

    python tools/verdict_table.py LABEL=CHECKPOINT [LABEL=CHECKPOINT ...]

Each checkpoint goes through ``assignadd-verify --json`` (n = 2000, seed 0: the command's defaults), so
the table shows exactly what a user would get. Each cell: the verdict, then the claim's headline
statistic with its 95% interval (and, for a failing claim, the reason).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def verify(checkpoint: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        exe = Path(sys.executable).with_name("assignadd-verify")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "assignadd.reports.verify_cli"]
        p = subprocess.run(cmd + [checkpoint, "--json", str(out), "--quiet"], capture_output=True, text=True)
        if p.returncode not in (0, 1):
            sys.exit(f"{checkpoint}: assignadd-verify exited {p.returncode}: {p.stderr.strip()}")
        return json.loads(out.read_text())


def cell(claim: dict) -> str:
    head = next((e for e in claim["evidence"] if e["kind"] == "causal" and e["required"]), None)
    text = f"**{claim['verdict']}**"
    if head is not None:
        m = head["measurement"]
        lo, hi = (m.get("ci") or [None, None])[:2]
        text += f" `{head['name']}` {m['value']:.3f}" + ("" if lo is None else f" [{lo:.3f}, {hi:.3f}]")
    if claim["verdict"] != "pass":
        text += f" ({claim['reason']})"
    return text


def main(args: list[str]) -> None:
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    reports = [(label, verify(path)) for label, path in (a.split("=", 1) for a in args)]
    ids = [c["claim"] for c in reports[0][1]["claims"]]
    print("| claim | " + " | ".join(label for label, _ in reports) + " |")
    print("|---|" + "---|" * len(reports))
    for i, cid in enumerate(ids):
        print(f"| `{cid}` | " + " | ".join(cell(r["claims"][i]) for _, r in reports) + " |")
    passed = [f"{label}: {r['summary']['passed']}/{r['summary']['total']}" for label, r in reports]
    print("\nClaims passed: " + ", ".join(passed) + ".")


if __name__ == "__main__":
    main(sys.argv[1:])
