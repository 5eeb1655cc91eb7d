"""Random streams of the measurement code, each named by what it is for.

Every random draw a measurement makes (a placebo's frequencies, a resampling's donors, a probe's
train/test split, a bootstrap's resamples, a mutant's rotation) comes from a stream derived from
``(seed, label)``: the run's seed and a short text saying what the stream is for ("placebo
frequencies", "resample matches", ...). One derivation serves numpy and torch:

    SeedSequence([seed, w0, w1, w2, w3])    w = the first 16 bytes of SHA-256(label), as 4 uint32 words

``numpy_rng`` is a ``numpy.random.Generator`` on that seed sequence; ``torch_generator`` a CPU
``torch.Generator`` seeded with its first 63 bits of state. SHA-256 and SeedSequence are the same in
every process, Python version and platform (Python's ``hash`` is not: it is salted per process).

Two places that must draw the same thing use one label; two different uses never share one. The
task's own streams (the split, the training batches, the evaluation pools: ``data/task.py``) and the
model's initialisation (``model/transformer.py``) keep their integer keys: they define what shipped
checkpoints were trained and evaluated on.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

__all__ = ["numpy_rng", "seed_sequence", "torch_generator", "torch_seed"]


def seed_sequence(seed: int, label: str) -> np.random.SeedSequence:
    """The one derivation: a ``numpy.random.SeedSequence`` for ``(seed, label)``.

    ``seed``: a non-negative integer (the run's seed); ``label``: what the stream is for, a string
    (an integer here is the bare key this module replaces, so it is refused)."""
    if not isinstance(label, str):
        raise TypeError(f"a random stream's label says what it is for, a string; got {type(label).__name__} {label!r}")
    if isinstance(seed, bool) or int(seed) != seed or int(seed) < 0:
        raise ValueError(f"a random stream's seed must be a non-negative integer, got {seed!r}")
    words = np.frombuffer(hashlib.sha256(label.encode("utf-8")).digest()[:16], dtype="<u4")
    return np.random.SeedSequence([int(seed), *(int(w) for w in words)])


def numpy_rng(seed: int, label: str) -> np.random.Generator:
    """A numpy generator for one named purpose: the same ``(seed, label)`` always gives the same stream."""
    return np.random.default_rng(seed_sequence(seed, label))


def torch_seed(seed: int, label: str) -> int:
    """The integer a torch generator for ``(seed, label)`` is seeded with: 63 bits of the seed
    sequence's state (non-negative, inside the range ``torch.Generator.manual_seed`` accepts)."""
    return int(seed_sequence(seed, label).generate_state(1, np.uint64)[0]) & (2**63 - 1)


def torch_generator(seed: int, label: str) -> torch.Generator:
    """A CPU torch generator for one named purpose: the same ``(seed, label)`` always gives the same
    stream, and two labels never share one."""
    return torch.Generator().manual_seed(torch_seed(seed, label))
