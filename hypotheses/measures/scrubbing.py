"""Causal scrubbing of the paper's circuit (Chan et al., Redwood Research, 2022), in two parts.

A hypothesis says what an activation depends on. Scrubbing replaces that activation, example by
example, with its value on another input the hypothesis calls equivalent (one that agrees on every
feature the hypothesis says matters); if the hypothesis is right, the model's accuracy survives.
What survives is measured against the model's own accuracy and against a floor where the same
activation is resampled with no feature kept.

The two parts of the paper's algorithm, each scrubbed where its output is read:

    routing   Layer 1's output at each prefix position (and the operand slots) depends only on the
              position and, at a value token, on the variable right before it (elsewhere on the token
              there): resample ``blocks.0.hook_attn_out`` from same-batch positions with equal features.
    addition  Layer 2's output at `=` depends only on the two operand values, however they arrived
              (constants, variables, any prefix): patch ``blocks.1.hook_attn_out`` at `=` from a
              freshly built sequence with the same operand values and a random form.

Wrong correspondences a reader could propose are scrubbed the same way and must lose accuracy:
"Layer 1 carries only positions" (value tokens resampled by position alone), "the MLP reads only one
operand" (Layer 2's output resampled from a sequence sharing only the first operand).
"""
from __future__ import annotations

import numpy as np
import torch

from ...data import KIND_0VAR, KIND_1VAR_LHS, KIND_1VAR_RHS, KIND_2VAR, POS_EQ, build_sequences, operand_sources
from ...data.tokens import POS_PLUS, POS_RHS
from ...interventions import Patch, Replace, Site, run
from ...interventions.mutants import generator
from ...model.hooks import ATTN_OUT_1, ATTN_OUT_2

ROUTING_FEATURES = ("hypothesis", "position_only", "none")
ADDITION_FEATURES = ("hypothesis", "first_operand_only", "none")


def _donors(keys: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """For each row, a random *other* row with the same key (itself when it is alone): indices (n,)."""
    n = len(keys)
    order = torch.randperm(n, generator=gen)
    keys_o = keys[order]
    sort = torch.argsort(keys_o, stable=True)
    sorted_keys = keys_o[sort]
    # within each run of equal keys, take the next member cyclically (a derangement within the group)
    start = torch.ones(n, dtype=torch.bool)
    start[1:] = sorted_keys[1:] != sorted_keys[:-1]
    group_start = torch.cummax(torch.where(start, torch.arange(n), torch.zeros(n, dtype=torch.long)), 0).values
    nxt = torch.arange(n) + 1
    end_of_group = torch.ones(n, dtype=torch.bool)
    end_of_group[:-1] = start[1:]
    nxt = torch.where(end_of_group, group_start, nxt)
    donor_sorted = sort[nxt]  # positions in keys_o
    out = torch.empty(n, dtype=torch.long)
    out[order[sort]] = order[donor_sorted]
    return out


def routing_scrub(model, tokens: torch.Tensor, labels: torch.Tensor, *, seed: int, features: str) -> dict:
    """Accuracy with Layer 1's output at positions 0..14 resampled (``features``: "hypothesis", the
    paper's; "position_only", the wrong one; "none", the floor). Returns {"correct", "acted"}."""
    if features not in ROUTING_FEATURES:
        raise ValueError(f"features must be one of {ROUTING_FEATURES}")
    B, T = tokens.shape
    first_var = model.cfg.first_var
    is_var = tokens >= first_var
    value_tok = torch.zeros_like(is_var)
    value_tok[:, 1:] = is_var[:, :-1] & ~is_var[:, 1:] & (torch.arange(1, T) < POS_PLUS)
    pos = torch.arange(T).expand(B, T)
    prev = torch.cat([torch.zeros(B, 1, dtype=torch.long), tokens[:, :-1]], 1)
    vocab = model.cfg.d_vocab
    if features == "hypothesis":  # (position, variable before a value token | token elsewhere)
        key = pos * (2 * vocab) + torch.where(value_tok, vocab + prev, tokens)
    elif features == "position_only":  # value tokens keep only their position; elsewhere as above
        key = pos * (2 * vocab) + torch.where(value_tok, torch.full_like(tokens, 2 * vocab - 1), tokens)
    else:
        key = pos.clone()
    scrubbed = torch.zeros(B, T, dtype=torch.bool)
    scrubbed[:, :POS_RHS + 1] = True
    flat = torch.arange(B * T).reshape(B, T)[scrubbed]
    donor = _donors(key[scrubbed], generator(seed, f"routing_scrub.{features}"))
    clean = run(model, tokens, [], read=[ATTN_OUT_1], stop_at_layer=1).activations[ATTN_OUT_1]
    source = clean.reshape(B * T, -1)[flat[donor]]  # (n, D)
    new = clean.clone()
    new[scrubbed] = source

    out = run(model, tokens, [Replace(Site(ATTN_OUT_1, positions=scrubbed), lambda act, hook: new.to(act.dtype))],
              last_only=True)
    acted = float((new - clean)[scrubbed].norm(dim=-1).mean())
    return {"correct": out.last_logits.argmax(-1) == labels, "acted": acted}


def _same_values_sequences(values: torch.Tensor, task, rng: np.random.Generator,
                           first_only: bool = False) -> torch.Tensor:
    """Fresh sequences with the given operand values (B, 2) in a random form (0-var, 1-var LHS/RHS,
    2-var, variables from the slots training allows); ``first_only`` keeps only the first value and
    draws the second."""
    B = len(values)
    V, N = task.vocab.n_vars, task.vocab.modulus
    n1 = values[:, 0].numpy()
    n2 = rng.integers(0, N, size=B) if first_only else values[:, 1].numpy()
    kind = rng.choice([KIND_0VAR, KIND_1VAR_LHS, KIND_1VAR_RHS, KIND_2VAR], size=B)
    lhs_ok = [v for v in range(V) if v not in set(task.never_lhs.tolist())]
    rhs_ok = [v for v in range(V) if v not in set(task.never_rhs.tolist())]
    var1 = rng.choice(lhs_ok, size=B)
    var2 = rng.choice(rhs_ok, size=B)
    clash = var1 == var2
    while clash.any():
        var2[clash] = rng.choice(rhs_ok, size=int(clash.sum()))
        clash = var1 == var2
    var1 = np.where(kind == KIND_1VAR_RHS, var2, var1)
    var1 = np.where(kind == KIND_0VAR, rng.integers(0, V, size=B), var1)
    return torch.from_numpy(build_sequences(kind, var1, var2, n1, n2, rng, task.vocab))


def addition_scrub(model, tokens: torch.Tensor, labels: torch.Tensor, task, *, seed: int, features: str) -> dict:
    """Accuracy with Layer 2's output at `=` patched from a fresh sequence that keeps ``features`` of
    the base ("hypothesis": both operand values; "first_operand_only": the first; "none": neither, the
    floor). Returns {"correct", "acted"}."""
    if features not in ADDITION_FEATURES:
        raise ValueError(f"features must be one of {ADDITION_FEATURES}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 7, ADDITION_FEATURES.index(features)]))
    src = operand_sources(tokens)
    rows = torch.arange(len(tokens))
    values = torch.stack([tokens[rows, src[:, 0]], tokens[rows, src[:, 1]]], 1)
    if features == "none":
        values = torch.from_numpy(rng.integers(0, task.vocab.modulus, size=(len(tokens), 2)))
    donors = _same_values_sequences(values, task, rng, first_only=features == "first_operand_only")
    clean = run(model, tokens, [], read=[ATTN_OUT_2], last_only=True).activations[ATTN_OUT_2][:, POS_EQ]
    out = run(model, tokens, [Patch(Site(ATTN_OUT_2, positions=POS_EQ), donors)], read=[ATTN_OUT_2], last_only=True)
    acted = float((out.activations[ATTN_OUT_2][:, POS_EQ] - clean).norm(dim=-1).mean())
    return {"correct": out.last_logits.argmax(-1) == labels, "acted": acted}
