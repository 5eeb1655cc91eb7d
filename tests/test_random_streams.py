"""Random streams are named by what they are for: ``random_streams`` derives every stream of the
measurement code from ``(seed, label)``, the same in every process, and no measurement keys a stream
by a bare integer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from assignadd.random_streams import numpy_rng, seed_sequence, torch_generator, torch_seed

PACKAGE = Path(__file__).resolve().parent.parent

_DRAWS = """
import json
from assignadd.random_streams import numpy_rng, torch_generator
import torch
out = {}
for seed, label in [(0, "placebo frequencies"), (7, "resample matches"), (123456789, "ünïcode label")]:
    out[f"{seed}/{label}"] = [numpy_rng(seed, label).integers(0, 2**31, size=4).tolist(),
                              torch.randint(0, 2**31, (4,), generator=torch_generator(seed, label)).tolist()]
print(json.dumps(out))
"""


def _draws_in_a_new_process(hash_seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", _DRAWS], capture_output=True, text=True, env=env, timeout=300, check=True
    )
    return json.loads(done.stdout)


def test_the_same_seed_and_label_give_the_same_stream_in_two_separate_processes():
    # two processes with different hash salts: a derivation through Python's hash() would differ here
    a, b = _draws_in_a_new_process("1"), _draws_in_a_new_process("2")
    assert a == b
    here = [
        numpy_rng(0, "placebo frequencies").integers(0, 2**31, size=4).tolist(),
        torch.randint(0, 2**31, (4,), generator=torch_generator(0, "placebo frequencies")).tolist(),
    ]
    assert a["0/placebo frequencies"] == here


def test_the_derivation_is_pinned():
    """The derivation itself, written out: a change to it moves every measurement's random draws (and the
    golden numbers), so it must be a deliberate one."""
    import hashlib

    words = np.frombuffer(hashlib.sha256(b"placebo frequencies").digest()[:16], dtype="<u4")
    ss = np.random.SeedSequence([3, *(int(w) for w in words)])
    assert seed_sequence(3, "placebo frequencies").entropy == ss.entropy
    assert np.array_equal(numpy_rng(3, "placebo frequencies").random(5), np.random.default_rng(ss).random(5))
    assert torch_seed(3, "placebo frequencies") == int(ss.generate_state(1, np.uint64)[0]) & (2**63 - 1)


def test_different_labels_or_seeds_give_different_streams():
    def np_draw(seed, label):
        return numpy_rng(seed, label).integers(0, 2**62, size=8).tolist()

    def torch_draw(seed, label):
        return torch.randint(0, 2**62, (8,), generator=torch_generator(seed, label)).tolist()

    for draw in (np_draw, torch_draw):
        assert draw(0, "placebo frequencies") == draw(0, "placebo frequencies")
        assert draw(0, "placebo frequencies") != draw(0, "placebo directions")
        assert draw(0, "placebo frequencies") != draw(1, "placebo frequencies")
        assert draw(0, "a") != draw(0, "a ")  # the label is taken as written
    labels = [f"label {i}" for i in range(200)]
    assert len({torch_seed(s, lab) for s in range(5) for lab in labels}) == 5 * len(labels)


def test_numpy_and_torch_streams_come_from_the_same_key():
    for seed, label in [(0, "resample draws"), (41, "identity probe split")]:
        ss = seed_sequence(seed, label)
        assert np.array_equal(numpy_rng(seed, label).random(6), np.random.default_rng(ss).random(6))
        assert (
            torch_generator(seed, label).initial_seed()
            == torch_seed(seed, label)
            == int(ss.generate_state(1, np.uint64)[0]) & (2**63 - 1)
        )
    # another key: both variants move together
    assert torch_seed(0, "resample draws") != torch_seed(0, "resample matches")
    assert seed_sequence(0, "resample draws").entropy != seed_sequence(0, "resample matches").entropy


def test_a_bare_integer_label_or_a_negative_seed_is_refused():
    with pytest.raises(TypeError, match="label"):
        numpy_rng(0, 31)
    with pytest.raises(TypeError, match="label"):
        torch_generator(0, 44)
    with pytest.raises(ValueError, match="non-negative"):
        numpy_rng(-1, "placebo frequencies")
    with pytest.raises(ValueError, match="non-negative"):
        torch_generator(1.5, "placebo frequencies")
    assert torch_seed(np.int64(3), "x") == torch_seed(3, "x")


# ----- no stream outside random_streams.py is keyed by a bare integer --------------------------------------
# A call that makes a random stream or seeds one: numpy's default_rng / SeedSequence / np.random.seed,
# torch's Generator / manual_seed.
STREAM_CALL = re.compile(r"\b(default_rng|SeedSequence|manual_seed|Generator|random\.seed)\s*\(")
SCANNED = ("hypotheses", "interventions", "reports", "data", "model", "training")
ALLOWED = {
    # The one derivation.
    "random_streams.py": "derives every stream from (seed, label)",
    # The task's own streams define the split, the training batches and the evaluation pools that shipped
    # checkpoints and runs were trained and measured on: relabelling them would change what a checkpoint
    # was trained on.
    "data/task.py": "the task's split, training batches and evaluation pools (shipped checkpoints)",
    # The model's initialisation from its seed: shipped checkpoints and runs were initialised from it.
    "model/transformer.py": "the model's initialisation (shipped checkpoints)",
    # Not converted here (owned elsewhere): each still keys a stream without a label. Remove an entry when
    # its file moves to random_streams.
    "hypotheses/session.py": "seeds the global numpy/torch generators for an interactive session",
}


def _code_lines(path: Path):
    """(line number, line) of the code, docstrings and comments left out (a docstring may name a call)."""
    import io
    import tokenize

    skip: set[int] = set()
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type == tokenize.STRING and tok.string.lstrip("rbuRBU").startswith(('"""', "'''")):
                skip.update(range(tok.start[0], tok.end[0] + 1))
    for i, line in enumerate(io.StringIO(path.read_text()), 1):
        if i not in skip:
            yield i, line.split("#", 1)[0]


def test_no_stream_in_the_measurement_code_is_keyed_by_a_bare_integer():
    found = []
    for path in sorted([p for d in SCANNED for p in (PACKAGE / d).rglob("*.py")] + list(PACKAGE.glob("*.py"))):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        found += [f"{rel}:{i}: {line.strip()}" for i, line in _code_lines(path) if STREAM_CALL.search(line)]
    assert not found, (
        "random streams made outside random_streams.py; derive them from (seed, label) with "
        "random_streams.numpy_rng / torch_generator:\n" + "\n".join(found)
    )


def test_the_allow_list_names_files_that_still_need_it():
    for rel in ALLOWED:
        path = PACKAGE / rel
        assert path.exists(), f"{rel} is allow-listed but gone"
        assert any(STREAM_CALL.search(line) for _, line in _code_lines(path)), (
            f"{rel} makes no random stream any more: take it off the allow-list"
        )
