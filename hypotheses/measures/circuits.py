"""Weight- and activation-level measurements of the routing circuit (SPEC §4.1, §4.2) and the
addition module read from weights (SPEC §4.3). The authors' progress measures, 0-indexed.

Every function returns per-item tensors (so callers can attach confidence intervals) or exact
numbers computed from the weights alone.
"""

from __future__ import annotations

import torch
from transformer_lens import FactoredMatrix

from ...data import POS_EQ, operand_sources, value_positions
from ...data.tokens import POS_LHS, POS_RHS, PREFIX_LEN
from ...interventions import capture
from ...model import AssignAddTransformer
from ...model.components import PAPER, Components

# Every function below reads the layers and heads of the ``components`` it is given, the paper's by default.


def _attn(model, layer):
    return model.blocks[layer].attn


def positional_qk(model: AssignAddTransformer, *, components: Components = PAPER) -> torch.Tensor:
    """S = W_pos[:12] W_Q W_K^T W_pos^T of the previous-token head (Layer 1's): how much query position q
    prefers key position k from positional embeddings alone. (12, 12)."""
    a, head = _attn(model, components.prev_layer), components.prev_head
    P = model.pos_embed.W_pos[:PREFIX_LEN]
    return (FactoredMatrix(P @ a.W_Q[head], (P @ a.W_K[head]).T)).AB.detach()


def positional_prev_token_rows(model: AssignAddTransformer, *, components: Components = PAPER) -> torch.Tensor:
    """For each query q in 1..11 of S (above), with keys > q, q itself and q-2 masked: is argmax q-1?
    (The authors mask q and q-2 so the measure asks 'previous token rather than itself or the one
    before', the contrast that matters in a 'var value' pair.) Bool (11,)."""
    S = positional_qk(model, components=components)
    q, k = torch.arange(len(S))[:, None], torch.arange(len(S))[None, :]
    masked = S.masked_fill((k >= q) | (k == q - 2), -torch.inf)
    return (masked.argmax(-1) == q[:, 0] - 1)[1:]


def variable_ov1_embeddings(model: AssignAddTransformer, *, components: Components = PAPER) -> torch.Tensor:
    """E_var OV_1: what the previous-token head writes when it attends to each variable token. (n_vars, d_model)."""
    a, head = _attn(model, components.prev_layer), components.prev_head
    first_var = model.cfg.first_var
    E_var = model.embed.W_E[first_var : first_var + model.cfg.n_vars]
    return (E_var @ a.W_V[head] @ a.W_O[head]).detach()


def identity_qk_matrix(model: AssignAddTransformer, *, components: Components = PAPER) -> torch.Tensor:
    """M = (E_var OV_1) QK_2 (E_var OV_1)^T, QK_2 = W_Q W_K^T of Layer 2: the Layer-2 score between a
    query carrying variable i's OV_1 image and a key carrying variable j's (QK_2 of the fetching head).
    (n_vars, n_vars)."""
    X = variable_ov1_embeddings(model, components=components)
    a2, heads = _attn(model, components.fetch_layer), components.fetch_heads
    Ms = [(X @ FactoredMatrix(a2.W_Q[h], a2.W_K[h].T) @ X.T).AB.detach() for h in heads]
    return Ms[0] if len(Ms) == 1 else torch.stack(Ms).mean(0)


def identity_qk_interaction(model: AssignAddTransformer, *, components: Components = PAPER) -> torch.Tensor:
    """M~ = X~ QK_2 X~^T, X~ = (E_var - mean_v E_var) OV_1: ``identity_qk_matrix`` double-centred,
    M~[i, j] = M[i, j] - mean_j M[i, j] - mean_i M[i, j] + mean M (the same matrix). The part of the
    Layer-2 score that depends on *both* the query's variable and the key's: what identity matching is.
    (n_vars, n_vars).

    Unlike M, it is fixed by the function: the differences E_var[i] - E_var[j] are differences of inputs
    Layer 1 receives (W_E[t] + W_pos[p]), and their OV_1 images are in what the residual at `=` can
    hold, so weights changed only where no input reaches (``interventions.mutants``'s
    ``layer1_unseen_inputs``, ``layer2_query_unseen_at_eq``) leave it alone; M reads E_var itself,
    which is not such a combination, and moves."""
    X = variable_ov1_embeddings(model, components=components).double()
    X = X - X.mean(0)
    a2, heads = _attn(model, components.fetch_layer), components.fetch_heads
    Ms = [(X @ a2.W_Q[h].detach().double() @ a2.W_K[h].detach().double().T @ X.T).float() for h in heads]
    return Ms[0] if len(Ms) == 1 else torch.stack(Ms).mean(0)


def identity_qk_diagonal(
    model: AssignAddTransformer, *, components: Components = PAPER
) -> tuple[torch.Tensor, torch.Tensor]:
    """``diagonal_margin`` of M (``identity_qk_matrix``)."""
    return diagonal_margin(identity_qk_matrix(model, components=components))


def diagonal_margin(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of a square M: (is the argmax the diagonal? bool (V,), margin = M_ii - max_{j != i} M_ij (V,))."""
    V = M.shape[0]
    off = M.masked_fill(torch.eye(V, dtype=torch.bool), -torch.inf).max(dim=1).values
    return M.argmax(dim=1) == torch.arange(V), M.diagonal() - off


def fetch_operand_shares(layer_pattern: torch.Tensor, tokens: torch.Tensor, components: Components) -> torch.Tensor:
    """Each head's part of the fetching role's attention to each operand, from a Layer-2 pattern (B, H, T,
    T) over ``tokens``: (H_role, 2) float64, c[h, j] = w_h(j) / sum_h' w_h'(j), with w_h(j) head h's mean
    weight from `=` on operand j's source (left, right). A role of one head has 1 for both operands; of
    two heads that each fetch one operand, 1 and 0; of two that share every operand evenly, 1/2 each."""
    heads = list(components.fetch_heads)
    src, rows = operand_sources(tokens), torch.arange(len(tokens))
    eq = layer_pattern[:, heads, POS_EQ].double()  # (B, H_role, T)
    w = torch.stack([eq[rows, :, src[:, j]] for j in (0, 1)], -1).mean(0)  # (H_role, 2)
    return w / w.sum(0).clamp(min=1e-30)


@torch.no_grad()
def fetch_shares(model: AssignAddTransformer, tokens: torch.Tensor, *, components: Components) -> torch.Tensor | None:
    """``fetch_operand_shares`` measured on ``tokens``; None for a role of one head (which needs none)."""
    if len(components.fetch_heads) == 1:
        return None
    pattern = capture(model, tokens, [components.PATTERN_2])[components.PATTERN_2]
    return fetch_operand_shares(pattern, tokens, components)


def operand_images(
    model: AssignAddTransformer, *, components: Components = PAPER, shares: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """What the fetching role writes at `=` for each number as the left and as the right operand, at unit
    weight on that operand: (left, right), each (N, d_model), row n = sum_h c[h, j] W_E[n] W_V^h W_O^h
    (``shares`` c: ``fetch_operand_shares``). For a role of one head both are OV_2 e_n (the same tensor):
    the paper's images. A role of several heads needs ``shares``: which head brings which operand is
    measured, not assumed."""
    N = model.cfg.d_vocab_out
    a2, heads = _attn(model, components.fetch_layer), components.fetch_heads
    E_num = model.embed.W_E[:N]
    if len(heads) == 1:
        ov = E_num @ a2.W_V[heads[0]] @ a2.W_O[heads[0]]  # (N, D)
        return ov, ov
    if shares is None:
        raise ValueError(
            "the fetching role has several heads: its operand images need each head's share (fetch_shares)"
        )
    per_head = torch.stack([E_num @ a2.W_V[h] @ a2.W_O[h] for h in heads])  # (H_role, N, D)
    c = shares.to(per_head.dtype)
    left, right = ((c[:, j, None, None] * per_head).sum(0) for j in (0, 1))
    return left, right


def ov2_mlp2_accuracy(
    model: AssignAddTransformer, *, components: Components = PAPER, shares: torch.Tensor | None = None
) -> tuple[float, torch.Tensor]:
    """The authors' ``ov2_mlp2_accuracy``: over all N^2 pairs (a, b), is argmax of
    (h + MLP_2(h)) W_U with h = OV_2 e_a + OV_2 e_b equal to (a + b) mod N? Weights only: the
    addition module fed exactly what an ideal routing delivers. Returns (accuracy, correct (N, N)).
    OV_2 is the fetching role's (for a role of several heads each operand's image mixes its heads by
    ``shares``: ``operand_images``), MLP_2 the adding MLP (a layer between them is not run)."""
    N = model.cfg.d_vocab_out
    left, right = operand_images(model, components=components, shares=shares)
    h = (left[:, None, :] + right[None, :, :]).reshape(N * N, -1)
    resid = h + model.blocks[components.mlp_layer].mlp(h, hooked=False)  # no LayerNorm: the weights' own circuit
    pred = model.unembed(resid).argmax(-1).reshape(N, N)
    target = (torch.arange(N)[:, None] + torch.arange(N)[None, :]) % N
    correct = pred == target
    return float(correct.float().mean()), correct


@torch.no_grad()
def layer1_activations(
    model: AssignAddTransformer, tokens: torch.Tensor, *, components: Components = PAPER
) -> dict[str, torch.Tensor]:
    """One forward stopped after the previous-token head's layer: {"pattern": that head's pattern
    (B, Tq, Tk), "eq_pattern": the role's `=` row's heads' mean pattern (``Components.prev_eq_heads``; the
    same tensor when that is the one head), "attn_out": its layer's ``hook_attn_out`` (B, T, d_model)},
    what the Layer-1 measures read."""
    c = components
    acts = capture(model, tokens, [c.PATTERN_1, c.ATTN_OUT_1])
    pattern = acts[c.PATTERN_1][:, c.prev_head]
    eq = pattern if not c.prev_eq_also else acts[c.PATTERN_1][:, list(c.prev_eq_heads)].mean(1)
    return {"pattern": pattern, "eq_pattern": eq, "attn_out": acts[c.ATTN_OUT_1]}


def fetching_pattern(layer_pattern: torch.Tensor, components: Components = PAPER) -> torch.Tensor:
    """The fetching role's attention from a Layer-2 pattern (B, H, ...) -> (B, ...): its head's, or for a
    role split between heads (``Components.fetch_also``) the mean of theirs, the share of the role's
    reading each key gets (one head of two that puts all of its weight on a key gives it 0.5)."""
    heads = components.fetch_heads
    if len(heads) == 1:
        return layer_pattern[:, heads[0]]
    return layer_pattern[:, list(heads)].mean(1)


@torch.no_grad()
def head_pattern(
    model, tokens: torch.Tensor, *, fetching: bool = False, components: Components = PAPER
) -> torch.Tensor:
    """The attention pattern (B, Tq, Tk) of the previous-token head (``fetching``: of the fetching head),
    from a hooked forward stopped once it is read."""
    c = components
    if fetching:
        return fetching_pattern(capture(model, tokens, [c.PATTERN_2])[c.PATTERN_2], c)
    return capture(model, tokens, [c.PATTERN_1])[c.PATTERN_1][:, c.prev_head]


def prev_token_attention(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    pattern1: torch.Tensor | None = None,
    *,
    components: Components = PAPER,
):
    """Layer-1 attention from prefix value tokens (a number right after a variable): per token, is the
    argmax key t-1, and the weight on t-1. Returns (argmax_is_prev bool (K,), weight (K,))."""
    p = head_pattern(model, tokens, components=components) if pattern1 is None else pattern1
    mask = value_positions(tokens, model.vocab)
    b, t = mask.nonzero(as_tuple=True)
    rows = p[b, t]  # (K, Tk)
    return rows.argmax(-1) == t - 1, rows[torch.arange(len(t)), t - 1]


def eq_top2_is(pattern: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """From the `=` query (last row), are the two largest keys exactly the set ``targets`` [B, 2]?"""
    top2 = pattern[:, POS_EQ].topk(2, dim=-1).indices.sort(dim=-1).values
    return (top2 == targets.sort(dim=-1).values).all(dim=-1)


def layer1_eq_to_operand_slots(model, tokens, pattern1=None, *, components: Components = PAPER) -> torch.Tensor:
    """Layer-1 attention from `=`: are its top-2 keys {13, 14}, the operand slots? Bool (B,)."""
    p = head_pattern(model, tokens, components=components) if pattern1 is None else pattern1
    return eq_top2_is(p, torch.tensor([[POS_LHS, POS_RHS]]).expand(len(tokens), 2))


def layer2_eq_to_operand_values(model, tokens, pattern2=None, *, components: Components = PAPER) -> torch.Tensor:
    """Layer-2 attention from `=`: are its top-2 keys exactly where the operands' values sit (the value
    tokens of variable operands, the slots of constant ones)? Bool (B,). Sequences whose two operands
    resolve to one position (never, for valid sequences) count as misses."""
    p = head_pattern(model, tokens, fetching=True, components=components) if pattern2 is None else pattern2
    src = operand_sources(tokens, model.vocab)
    ok = eq_top2_is(p, src)
    return ok & (src[:, 0] != src[:, 1]) & (src >= 0).all(dim=1)


@torch.no_grad()
def last_position_correct(
    model: AssignAddTransformer, tokens: torch.Tensor, labels: torch.Tensor, batch: int | None = None
) -> torch.Tensor:
    """Per-sequence correctness of the answer at the last position, through the one hooked forward
    (``last_only=True``: every hook, a knock-out's included, fires; only the last position's answer is
    computed). Bool (B,), on ``labels``' device; the tokens are moved to the model's device batch by batch,
    ``batch`` sequences at a time (default ``interventions.engine.CLEAN_CHUNK``: a knock-out's edits are
    per sequence, so the pieces give the same answers as one forward, faster)."""
    from ...interventions import engine, run

    batch = batch or engine.CLEAN_CHUNK
    dev = next(model.parameters()).device
    out = []
    for i in range(0, len(tokens), batch):
        answer = run(model, tokens[i : i + batch].to(dev), [], last_only=True).last_logits.argmax(-1)
        out.append(answer.to(labels.device) == labels[i : i + batch])
    return torch.cat(out)
