"""The task's split, its training table and its evaluation pools (SPEC §1.3, §1.4)."""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .sequences import (
    KIND_0VAR,
    KIND_1VAR_LHS,
    KIND_1VAR_RHS,
    KIND_2VAR,
    build_sequences,
    labels_for,
)
from .tokens import Vocab

POOL_NAMES = (
    "0var_train",
    "0var_heldout_pair",
    "1var_train",
    "1var_heldout_pair",
    "1var_restricted_slot",
    "2var_train",
    "2var_heldout_pair",
    "2var_restricted_1",
    "2var_restricted_2",
    "b_operand_1var",
    "b_operand_2var",
)
HELDOUT_POOLS = ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair")
RESTRICTED_POOLS = ("1var_restricted_slot", "2var_restricted_1", "2var_restricted_2")


class TaskError(ValueError):
    """Task parameters that make no valid task."""


@dataclass(frozen=True)
class TaskConfig:
    """Everything that fixes a task: the split rule's inputs and the restricted variables."""

    f: float = 0.7
    r: float = 1.0
    seed: int = 42
    modulus: int = 59
    n_vars: int = 12
    never_rhs: tuple[str, ...] = ("a", "b")  # never the RHS operand in training
    never_lhs: tuple[str, ...] = ("k", "l")  # never the LHS operand in training

    def to_dict(self) -> dict:
        return {**asdict(self), "never_rhs": list(self.never_rhs), "never_lhs": list(self.never_lhs)}

    @classmethod
    def from_dict(cls, d: dict) -> "TaskConfig":
        d = dict(d)
        for k in ("never_rhs", "never_lhs"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)


class Task:
    """The paper's task: which number pairs train, which are held out, and how sequences are drawn.

    ``seed`` is the *split* seed (SPEC §1.3: ``random.Random(seed).sample`` over the row-major pair
    list); a training run's own seed (initialisation, batch order) is separate.
    """

    def __init__(
        self,
        f: float = 0.7,
        r: float = 1.0,
        seed: int = 42,
        *,
        modulus: int = 59,
        n_vars: int = 12,
        never_rhs: tuple[str, ...] = ("a", "b"),
        never_lhs: tuple[str, ...] = ("k", "l"),
    ):
        if not (0.0 < f <= 1.0) or not math.isfinite(f):
            raise TaskError(f"f must be in (0, 1], got {f}")
        if not (0.0 <= r <= 1.0) or not math.isfinite(r):
            raise TaskError(f"r must be in [0, 1], got {r}")
        self.config = TaskConfig(f, r, int(seed), modulus, n_vars, tuple(never_rhs), tuple(never_lhs))
        self.vocab = Vocab(modulus, n_vars)
        names = self.vocab.var_names
        for v in (*never_rhs, *never_lhs):
            if v not in names:
                raise TaskError(f"restricted variable {v!r} is not one of {names[0]}..{names[-1]}")
        self.never_rhs = np.array(sorted(names.index(v) for v in never_rhs), dtype=np.int64)
        self.never_lhs = np.array(sorted(names.index(v) for v in never_lhs), dtype=np.int64)

        all_pairs = [(a, b) for a in range(modulus) for b in range(modulus)]
        n_train = math.floor(f * len(all_pairs))
        train = random.Random(seed).sample(all_pairs, n_train)
        self.training_pairs: set[tuple[int, int]] = set(train)
        self.heldout_pairs: set[tuple[int, int]] = set(all_pairs) - self.training_pairs
        self._train_arr = np.array(sorted(self.training_pairs), dtype=np.int64).reshape(-1, 2)
        self._heldout_arr = np.array(sorted(self.heldout_pairs), dtype=np.int64).reshape(-1, 2)
        self._all_arr = np.array(all_pairs, dtype=np.int64)

        V = n_vars
        self.allowed_lhs_vars = np.setdiff1d(np.arange(V), self.never_lhs)
        self.allowed_rhs_vars = np.setdiff1d(np.arange(V), self.never_rhs)
        pairs = np.array([(i, j) for i in range(V) for j in range(V) if i != j], dtype=np.int64)
        lhs_bad = np.isin(pairs[:, 0], self.never_lhs)
        rhs_bad = np.isin(pairs[:, 1], self.never_rhs)
        self.valid_var_pairs = pairs[~lhs_bad & ~rhs_bad]  # 92 for the paper's task
        self.restricted_1_var_pairs = pairs[lhs_bad ^ rhs_bad]  # 36
        self.restricted_2_var_pairs = pairs[lhs_bad & rhs_bad]  # 4
        self._table = self._build_table()

    def __repr__(self) -> str:
        c = self.config
        return f"Task(f={c.f}, r={c.r}, seed={c.seed}, train_pairs={len(self.training_pairs)})"

    # ----- training -------------------------------------------------------------------------------
    def _build_table(self) -> dict[str, np.ndarray]:
        """SPEC §1.3's training table, one row per (pair, kind, variable)."""
        V = self.vocab.n_vars
        blocks = []
        for kind, vars_ in (
            (KIND_0VAR, np.arange(V)),
            (KIND_1VAR_LHS, self.allowed_lhs_vars),
            (KIND_1VAR_RHS, self.allowed_rhs_vars),
        ):
            P, K = len(self._train_arr), len(vars_)
            blocks.append((np.full(P * K, kind), np.tile(vars_, P), np.repeat(self._train_arr, K, axis=0)))
        # 10 2-var rows per pair, each kept with probability r; the variable pair is drawn per batch.
        n2 = 10
        keep = np.random.default_rng([self.config.seed, 2]).random(len(self._train_arr) * n2) < self.config.r
        pairs2 = np.repeat(self._train_arr, n2, axis=0)[keep]
        blocks.append((np.full(len(pairs2), KIND_2VAR), np.full(len(pairs2), -1), pairs2))
        kind = np.concatenate([b[0] for b in blocks])
        var = np.concatenate([b[1] for b in blocks])
        nums = np.concatenate([b[2] for b in blocks])
        return {"kind": kind.astype(np.int64), "var": var.astype(np.int64), "num1": nums[:, 0], "num2": nums[:, 1]}

    @property
    def n_training_rows(self) -> int:
        return len(self._table["kind"])

    def sample_batch(self, batch_size: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """A training batch: table rows drawn uniformly with replacement, each built afresh."""
        t = self._table
        idx = rng.integers(0, self.n_training_rows, size=batch_size)
        pair_idx = rng.integers(0, len(self.valid_var_pairs), size=batch_size)
        kind, var, num1, num2 = t["kind"][idx], t["var"][idx], t["num1"][idx], t["num2"][idx]
        vp = self.valid_var_pairs[pair_idx]
        two = kind == KIND_2VAR
        var1 = np.where(two, vp[:, 0], np.where(kind == KIND_1VAR_RHS, -1, var))
        var2 = np.where(two, vp[:, 1], np.where(kind == KIND_1VAR_RHS, var, -1))
        return self._sequences(kind, var1, var2, num1, num2, rng)

    def training_batch(self, run_seed: int, step: int, batch_size: int = 512):
        """The batch of a run at a step: a pure function of (run seed, step), so resuming is exact."""
        return self.sample_batch(batch_size, np.random.default_rng([int(run_seed), int(step), 7]))

    def _sequences(self, kind, var1, var2, num1, num2, rng) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens [B, 16], labels [B])`` for rows (kind, var1, var2, num1, num2) (``build_sequences``)."""
        tokens = build_sequences(kind, var1, var2, num1, num2, rng, self.vocab)
        labels = labels_for(num1, num2, self.vocab.modulus)
        return torch.from_numpy(np.ascontiguousarray(tokens)), torch.from_numpy(np.ascontiguousarray(labels))

    # ----- evaluation -----------------------------------------------------------------------------
    def pool(self, name: str, size: int = 2000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """An evaluation pool of SPEC §1.4: ``(tokens [size, 16], labels [size])``, fixed by ``seed``."""
        if name not in POOL_NAMES:
            raise KeyError(f"unknown pool {name!r}; pools are: {', '.join(POOL_NAMES)}")
        if size < 1:
            raise ValueError(f"pool size must be positive, got {size}")
        rng = np.random.default_rng([int(seed), zlib.crc32(name.encode())])
        V = self.vocab.n_vars
        count, kind_name = name.split("_", 1)
        which = "train" if kind_name in ("train", "restricted_slot", "restricted_1", "restricted_2") else "heldout"
        if name.startswith("b_operand"):
            which = "all"
        pairs = {"train": self._train_arr, "heldout": self._heldout_arr, "all": self._all_arr}[which]
        if len(pairs) == 0:
            raise TaskError(f"pool {name!r} needs {which} pairs, and this task has none")
        nums = pairs[rng.integers(0, len(pairs), size=size)]
        num1, num2 = nums[:, 0], nums[:, 1]
        minus = np.full(size, -1)
        b = self.vocab.var_names.index("b")
        if count == "0var":
            kind = np.full(size, KIND_0VAR)
            var1, var2 = rng.integers(0, V, size=size), minus
        elif count == "1var" or name == "b_operand_1var":
            lhs = rng.random(size) < 0.5
            kind = np.where(lhs, KIND_1VAR_LHS, KIND_1VAR_RHS)
            if name == "b_operand_1var":
                lhs_vars = rhs_vars = np.array([b])
            elif kind_name == "restricted_slot":
                lhs_vars, rhs_vars = self.never_lhs, self.never_rhs
            else:
                lhs_vars, rhs_vars = self.allowed_lhs_vars, self.allowed_rhs_vars
            lv = lhs_vars[rng.integers(0, len(lhs_vars), size=size)]
            rv = rhs_vars[rng.integers(0, len(rhs_vars), size=size)]
            var1, var2 = np.where(lhs, lv, -1), np.where(lhs, -1, rv)
        else:  # 2-var
            kind = np.full(size, KIND_2VAR)
            if name == "b_operand_2var":
                others = np.array([v for v in range(V) if v != b])
                other = others[rng.integers(0, len(others), size=size)]
                lhs = rng.random(size) < 0.5
                var1, var2 = np.where(lhs, b, other), np.where(lhs, other, b)
            else:
                var_pairs = {
                    "train": self.valid_var_pairs,
                    "heldout_pair": self.valid_var_pairs,
                    "restricted_1": self.restricted_1_var_pairs,
                    "restricted_2": self.restricted_2_var_pairs,
                }[kind_name]
                vp = var_pairs[rng.integers(0, len(var_pairs), size=size)]
                var1, var2 = vp[:, 0], vp[:, 1]
        return self._sequences(kind, var1, var2, num1, num2, rng)

    def exhaustive_0var_heldout(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Every held-out pair once, as a 0-var sequence."""
        rng = np.random.default_rng([int(seed), 100])
        p = self._heldout_arr
        var = rng.integers(0, self.vocab.n_vars, size=len(p))
        return self._sequences(np.full(len(p), KIND_0VAR), var, np.full(len(p), -1), p[:, 0], p[:, 1], rng)

    def exhaustive_2var_union(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Every held-out pair x every valid variable pair, plus every training pair x every restricted
        variable pair (193,580 sequences for the paper's task)."""
        rng = np.random.default_rng([int(seed), 200])
        restricted = np.concatenate([self.restricted_1_var_pairs, self.restricted_2_var_pairs])
        parts = ((self._heldout_arr, self.valid_var_pairs), (self._train_arr, restricted))
        nums = np.concatenate([np.repeat(pairs, len(var_pairs), axis=0) for pairs, var_pairs in parts])
        vp = np.concatenate([np.tile(var_pairs, (len(pairs), 1)) for pairs, var_pairs in parts])
        return self._sequences(np.full(len(nums), KIND_2VAR), vp[:, 0], vp[:, 1], nums[:, 0], nums[:, 1], rng)

    def numbers_missing_from_training(self) -> list[int]:
        """Numbers that appear in no training pair (a split that cannot teach them)."""
        seen = set(self._train_arr.ravel().tolist())
        return [n for n in range(self.vocab.modulus) if n not in seen]
