"""Vectorized sequence generation (SPEC §1.2).

A sequence is an assignment prefix of 12 tokens, then the core ``+ LHS RHS =``. Every function here
builds a whole batch with array operations; the random draws come from one ``numpy.random.Generator``
in a fixed order, so a seed gives the same tokens on every machine.
"""

from __future__ import annotations

import numpy as np
import torch

from .tokens import POS_EQ, POS_LHS, POS_PLUS, POS_RHS, PREFIX_LEN, SEQ_LEN, VOCAB, Vocab

# Kinds of sequence (SPEC §1.2). The var columns hold variable *indices* (0 = a), -1 where unused.
KIND_0VAR, KIND_1VAR_LHS, KIND_1VAR_RHS, KIND_2VAR = 0, 1, 2, 3
MAX_ASSIGNMENTS = 6


def build_sequences(
    kind: np.ndarray,
    var1: np.ndarray,
    var2: np.ndarray,
    num1: np.ndarray,
    num2: np.ndarray,
    rng: np.random.Generator,
    vocab: Vocab = VOCAB,
) -> np.ndarray:
    """Token ids [B, 16] for rows (kind, var1, var2, num1, num2).

    ``var1`` is the LHS variable (kinds 1-var LHS and 2-var) or, for 0-var rows, the variable that is
    assigned a random value; ``var2`` is the RHS variable (1-var RHS and 2-var). The prefix holds
    n ~ U{1..6} distinct assignments (n >= 2 for 2-var), shuffled, with 12 - 2n PADs each dropped
    independently into one of the n + 1 gaps.
    """
    kind, var1, var2, num1, num2 = (np.asarray(x, dtype=np.int64) for x in (kind, var1, var2, num1, num2))
    B, V, N = kind.shape[0], vocab.n_vars, vocab.modulus
    rows = np.arange(B)

    n = rng.integers(1, MAX_ASSIGNMENTS + 1, size=B)
    n = np.where(kind == KIND_2VAR, np.maximum(n, 2), n)

    # The required assignments come first in `chosen`; distractors follow in random order.
    req0_var = np.where(kind == KIND_1VAR_RHS, var2, var1)
    req0_val = np.select([kind == KIND_0VAR, kind == KIND_1VAR_RHS], [rng.integers(0, N, size=B), num2], default=num1)
    var_keys = rng.random((B, V))
    var_keys[rows, req0_var] = -2.0
    two = kind == KIND_2VAR
    var_keys[rows[two], var2[two]] = -1.0
    chosen = np.argsort(var_keys, axis=1, kind="stable")[:, :MAX_ASSIGNMENTS]  # (B, 6)
    values = rng.integers(0, N, size=(B, MAX_ASSIGNMENTS))
    values[:, 0] = req0_val
    values[two, 1] = num2[two]

    # Shuffle the n assignments: slots >= n sort last.
    slot_keys = rng.random((B, MAX_ASSIGNMENTS))
    slot_keys[np.arange(MAX_ASSIGNMENTS)[None, :] >= n[:, None]] = np.inf
    order = np.argsort(slot_keys, axis=1, kind="stable")
    assigned_vars = np.take_along_axis(chosen, order, axis=1)
    assigned_vals = np.take_along_axis(values, order, axis=1)

    # PADs: each of the 12 - 2n goes into one of the n + 1 gaps uniformly.
    max_pads = PREFIX_LEN - 2
    n_pads = PREFIX_LEN - 2 * n
    gap = np.floor(rng.random((B, max_pads)) * (n[:, None] + 1)).astype(np.int64)
    live = np.arange(max_pads)[None, :] < n_pads[:, None]
    counts = np.zeros((B, MAX_ASSIGNMENTS + 1), dtype=np.int64)
    np.add.at(counts, (np.repeat(rows, max_pads)[live.ravel()], gap[live]), 1)
    # Assignment i starts after the PADs of gaps 0..i and the i assignments before it.
    starts = np.cumsum(counts, axis=1)[:, :MAX_ASSIGNMENTS] + 2 * np.arange(MAX_ASSIGNMENTS)[None, :]

    tokens = np.full((B, SEQ_LEN), vocab.pad, dtype=np.int64)
    used = np.arange(MAX_ASSIGNMENTS)[None, :] < n[:, None]
    b_idx = np.broadcast_to(rows[:, None], used.shape)[used]
    tokens[b_idx, starts[used]] = vocab.first_var + assigned_vars[used]
    tokens[b_idx, starts[used] + 1] = assigned_vals[used]

    lhs_is_var = (kind == KIND_1VAR_LHS) | two
    rhs_is_var = (kind == KIND_1VAR_RHS) | two
    tokens[:, POS_PLUS] = vocab.plus
    tokens[:, POS_LHS] = np.where(lhs_is_var, vocab.first_var + var1, num1)
    tokens[:, POS_RHS] = np.where(rhs_is_var, vocab.first_var + var2, num2)
    tokens[:, POS_EQ] = vocab.eq
    return tokens


def labels_for(num1, num2, modulus: int = VOCAB.modulus) -> np.ndarray:
    return (np.asarray(num1, dtype=np.int64) + np.asarray(num2, dtype=np.int64)) % modulus


def operand_sources(tokens: torch.Tensor, vocab: Vocab = VOCAB) -> torch.Tensor:
    """Where each operand's value sits: [B, 2] positions for (LHS, RHS).

    A constant operand is its own slot (``POS_LHS`` 13 or ``POS_RHS`` 14); a variable operand points at the value token right
    after that variable's assignment in the prefix. A variable with no assignment gives -1.
    """
    tokens = torch.as_tensor(tokens)
    prefix = tokens[:, :PREFIX_LEN]
    out = []
    for slot in (POS_LHS, POS_RHS):
        op = tokens[:, slot]
        match = prefix[:, :-1] == op[:, None]  # var token positions 0..10; the value follows
        has = match.any(dim=1)
        pos = match.float().argmax(dim=1) + 1
        out.append(
            torch.where(vocab.is_var(op), torch.where(has, pos, torch.full_like(pos, -1)), torch.full_like(pos, slot))
        )
    return torch.stack(out, dim=1)


def value_positions(tokens: torch.Tensor, vocab: Vocab = VOCAB) -> torch.Tensor:
    """Boolean mask [B, 16] of the prefix positions holding an assigned value (a number after a variable)."""
    tokens = torch.as_tensor(tokens)
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[:, 1:PREFIX_LEN] = vocab.is_var(tokens[:, : PREFIX_LEN - 1]) & (tokens[:, 1:PREFIX_LEN] < vocab.modulus)
    return mask
