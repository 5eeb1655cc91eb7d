"""Record the bundled reference's golden numbers (every evidence value at n = 500, seed 0) into
tests/golden/reference_n500.json, read by tests/test_mutants.py. Run only for a change meant to move
numbers, and say so in the commit.

    python tools/golden.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import assignadd  # noqa: E402
from assignadd import Task, load_checkpoint  # noqa: E402
from assignadd.fileio import atomic_write  # noqa: E402
from assignadd.hypotheses import Context, run_all  # noqa: E402
from test_mutants import GOLDEN, GOLDEN_N, golden_numbers  # noqa: E402

if __name__ == "__main__":
    torch.set_num_threads(1)
    results = run_all(Context(load_checkpoint(assignadd.reference_checkpoint()), Task(), n=GOLDEN_N))
    atomic_write(
        GOLDEN,
        json.dumps(
            {k: (round(v, 6) if isinstance(v, float) else v) for k, v in golden_numbers(results).items()},
            indent=1,
            sort_keys=True,
        )
        + "\n",
    )
    print(f"wrote {GOLDEN}")
