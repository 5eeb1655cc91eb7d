"""Is one attention head a previous-token head? Two checks for any (layer, head) of any model of this
class on any token batch, with no knowledge of the task: one reads the attention, one edits it.

The intuition: a previous-token head (a) puts most of each row's weight on the key just before the
query, and (b) what it writes at t is made of what it reads at t-1, so taking the weight on t-1 away
changes its output far more than taking away its next-largest key does. The paper's
``previous_token_head`` claim asks (a) as ``value_attends_to_variable`` and (b) as
``identity_needs_previous_token``, at its value tokens and through its probe; here both are read at
every query position t >= 1 (position 0 has no previous key) and (b) on the head's own output.

    (a) share_prev = mean over t >= 1 of 1[argmax_k A[t, k] = t - 1 and A[t, t-1] >= 0.5]
    (b) o_t = sum_k A[t, k] v_k W_O^h                            the head's write at t (d_model)
        A~  = A with A[t, t-1] := 0, the row renormalised         (edit)
        A'  = A with A[t, k*] := 0, k* = argmax_{k != t-1} A[t, k], the row renormalised   (placebo)
        change(A~) = sum_t ||o~_t - o_t|| / sum_t ||o_t||          (the same for the placebo)
A row left with no weight after the removal (every other key's weight under fp32 underflow) is made
uniform over the remaining visible keys: the head cannot attend to the removed key, and has nothing
else it prefers. Only the head's own output is recomputed; its queries, keys and values stay clean.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from assignadd.model.transformer import AssignAddTransformer

MAJORITY = 0.5  # "attends to" one key: the argmax, holding at least half the row's weight (the claim's)
# (a) as the previous_token_head claim's value_attends_to_variable: >= 90% of rows.
PREV_SHARE = 0.90
# (b) taking t-1 away must change at least half of what the head writes (a head made of t-1 loses
# nearly all of it) ...
PREV_CHANGE = 0.50
# ... and at least twice what taking away its largest other key changes (the change is about t-1,
# not about any removal: a head spread over several keys changes about as much under either edit).
PLACEBO_RATIO = 2.0


@dataclass(frozen=True)
class HeadCheck:
    """The two measurements of one head on one batch, and whether each passes its threshold."""

    layer: int
    head: int
    share_prev: float  # (a)
    change_prev: float  # (b): removing t-1
    change_placebo: float  # (b): removing the largest other key
    n_rows: int  # query rows measured: B * (T - 1)

    @property
    def attends(self) -> bool:
        return self.share_prev >= PREV_SHARE

    @property
    def needs_previous(self) -> bool:
        return self.change_prev >= PREV_CHANGE and self.change_prev >= PLACEBO_RATIO * self.change_placebo

    @property
    def passes(self) -> bool:
        return self.attends and self.needs_previous


def _edited_rows(pattern: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Pattern rows (N, T_k) of queries ``query`` (N,) with the weight on ``key`` (N,) set to 0 and the
    row renormalised; a row with no weight left is uniform over its other visible keys (0..t, not ``key``)."""
    n, t_k = pattern.shape
    rows = torch.arange(n)
    out = pattern.clone()
    out[rows, key] = 0.0
    visible = torch.arange(t_k)[None, :] <= query[:, None]  # (N, T_k), causal: keys 0..t
    visible[rows, key] = False
    total = out.sum(-1, keepdim=True)
    uniform = visible.to(out.dtype) / visible.sum(-1, keepdim=True).clamp(min=1)
    return torch.where(total > 0, out / total.clamp(min=torch.finfo(out.dtype).tiny), uniform)


@torch.no_grad()
def previous_token_check(model: AssignAddTransformer, tokens: torch.Tensor, layer: int, head: int) -> HeadCheck:
    """(a) and (b) of the module docstring for head ``head`` of layer ``layer`` on ``tokens`` (B, T), T >= 2."""
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (B, T) with T >= 2, got shape {tuple(tokens.shape)}")
    if not 0 <= layer < model.cfg.n_layers or not 0 <= head < model.cfg.n_heads:
        raise ValueError(
            f"no head {layer}.{head}: the model has {model.cfg.n_layers} layers of {model.cfg.n_heads} heads"
        )
    names = (f"blocks.{layer}.attn.hook_pattern", f"blocks.{layer}.attn.hook_v")
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names, stop_at_layer=layer + 1)
    A = cache[names[0]][:, head].double()  # (B, T_q, T_k)
    v = cache[names[1]][:, :, head].double()  # (B, T_k, d_head)
    W_O = model.blocks[layer].attn.W_O[head].double()  # (d_head, d_model)
    B, T, _ = A.shape

    # Every query t >= 1 of every sequence, flattened: (N, T_k) rows with N = B * (T - 1).
    b_idx = torch.arange(B).repeat_interleave(T - 1)
    t_idx = torch.arange(1, T).repeat(B)
    rows = A[b_idx, t_idx]
    prev = t_idx - 1
    weight_prev = rows[torch.arange(len(rows)), prev]
    share = ((rows.argmax(-1) == prev) & (weight_prev >= MAJORITY)).double().mean()

    others = rows.clone()
    others[torch.arange(len(rows)), prev] = -1.0  # never the largest other key
    others[torch.arange(T)[None, :] > t_idx[:, None]] = -1.0  # nor a future key
    placebo_key = others.argmax(-1)

    values = v[b_idx]  # (N, T_k, d_head)

    def written(pattern_rows):  # (N, T_k) -> the head's write (N, d_model)
        return torch.einsum("nk,nke->ne", pattern_rows, values) @ W_O

    clean = written(rows)
    norm = clean.norm(dim=-1).sum().clamp(min=torch.finfo(torch.float64).tiny)

    def change(key):
        return float((written(_edited_rows(rows, t_idx, key)) - clean).norm(dim=-1).sum() / norm)

    return HeadCheck(
        layer=layer,
        head=head,
        share_prev=float(share),
        change_prev=change(prev),
        change_placebo=change(placebo_key),
        n_rows=len(rows),
    )
