"""Component-local causal measurements (SPEC §6): each intervenes on one component of the circuit and
measures what that component writes where the next component reads it, not the final answer, so a
break further downstream cannot decide the claim about it.

    Layer-1 head   -> the variable identity in ``blocks.0.hook_attn_out`` at value tokens (read there by
                      Layer 2's keys), decoded by a linear probe fitted on the model's own clean run
    Layer-2 QK     -> Layer 2's attention pattern from `=` (it decides which value token is read)
    Layer-2 OV     -> ``blocks.1.hook_resid_mid`` at `=` (the Layer-2 MLP's input)

Every edit also reports how much it changed the activation it targets (``acted``), so a control that
did nothing is seen as such instead of counting for the claim.
"""

from __future__ import annotations

import torch

from ...data import POS_EQ, POS_LHS, POS_RHS, operand_sources, value_positions
from ...interventions import Patch, Replace, Site, run, run_in_pieces
from ...model import AssignAddTransformer
from ...model.components import PAPER, Components
from ...random_streams import numpy_rng, torch_generator
from .circuits import fetching_pattern
from .residual import ov2_number_images


# ----- Layer 1: the variable identity written at value tokens ------------------------------------------
def uniform_rows(pattern: torch.Tensor, hook=None) -> torch.Tensor:
    """Every query row uniform over its causal keys (the engine applies it only at the site's rows)."""
    T = pattern.shape[-1]
    causal = torch.tril(torch.ones(T, T, dtype=pattern.dtype, device=pattern.device))
    return (causal / causal.sum(-1, keepdim=True)).expand_as(pattern)


def _layer1_out(model, tokens, edits_for=None, components: Components = PAPER) -> tuple[torch.Tensor, torch.Tensor]:
    """(attn_out_1 (B, T, D), pattern_1 (B, T, T)), up to the previous-token head's layer only, under the
    interventions ``edits_for(rows)`` gives for each piece of the batch (per-sequence edits; ``run_in_pieces``)."""
    c = components
    out = run_in_pieces(
        model, tokens, edits_for or (lambda rows: []), read=[c.ATTN_OUT_1, c.PATTERN_1], stop_at_layer=c.prev_layer + 1
    )
    return out.activations[c.ATTN_OUT_1], out.activations[c.PATTERN_1][:, c.prev_head]


def _rows_to(
    pattern: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor, mode: str, head: int | None = None
) -> torch.Tensor:
    """A new pattern (B, H, T, T): at rows ``mask`` (B, T), ``mode`` = "onehot" puts all weight on key
    ``keys`` (B, T); "remove" takes that key's weight away and renormalises the row over the others;
    "dilute" mixes the row half and half with a uniform row over its causal keys (``keys`` unused).
    ``head``: edit that head only (None: every head of the layer)."""
    B, H, T, _ = pattern.shape
    onehot = torch.nn.functional.one_hot(keys.clamp(min=0), T).to(pattern.dtype)[:, None]  # (B, 1, T, T)
    if mode == "dilute":  # half the row's weight spread uniformly over its causal keys
        new = 0.5 * pattern + 0.5 * uniform_rows(pattern)
    elif mode == "onehot":
        new = onehot.expand_as(pattern)
    else:
        kept = pattern * (1 - onehot)
        new = kept / kept.sum(-1, keepdim=True).clamp(min=1e-30)
    where = mask[:, None, :, None]  # (B, 1, T, 1)
    if head is not None:
        where = where & (torch.arange(H, device=pattern.device) == head)[None, :, None, None]
    return torch.where(where, new, pattern)


class RidgeProbe:
    """A one-vs-rest ridge classifier, closed form in float64: scikit-learn's ``RidgeClassifier(alpha)``
    (labels coded ±1, features and targets centred, W = (XcᵀXc + αI)⁻¹ XcᵀYc, intercept from the
    means; ``predict`` is the class of the largest score), written in torch so that reading a probe
    costs no scikit-learn import. ``tests/test_claims.py`` checks the two give the same predictions."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, alpha: float = 1.0):
        X = X.double()
        self.classes = torch.unique(y)  # sorted, as scikit-learn's classes_
        Y = torch.where(y[:, None] == self.classes[None, :], 1.0, -1.0).double()  # (n, K)
        x_mean, y_mean = X.mean(0), Y.mean(0)
        Xc, Yc = X - x_mean, Y - y_mean
        A = Xc.T @ Xc + alpha * torch.eye(X.shape[1], dtype=torch.float64)
        self.W = torch.linalg.solve(A, Xc.T @ Yc)  # (d, K)
        self.b = y_mean - x_mean @ self.W

    def predict(self, X: torch.Tensor) -> torch.Tensor:
        return self.classes[(X.double() @ self.W + self.b).argmax(-1)]


def identity_edits(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    *,
    seed: int,
    redirect: bool = True,
    components: Components = PAPER,
    clean: dict | None = None,
) -> dict:
    """Which variable does Layer 1 write at each value token, clean and under edits of its attention?

    A ridge probe (variable id from ``attn_out_1`` at value tokens) is fitted on half the sequences of
    the model's own clean run and read on the other half (``rows``). On those value tokens t (variable
    v at t-1), per token:
        clean             probe reads v
        previous_removed  row t's weight on t-1 taken away (renormalised): probe still reads v?
        diluted           row t mixed half and half with a uniform row (t-1 keeps the largest weight):
                          a placebo that acts on any row, even a one-hot one, and that the claim
                          says leaves the identity readable
        redirect          row t attends only to the variable token of another assignment (variable w):
                          probe reads w?
        redirect_value    row t attends only to that assignment's *value* token: probe reads w?
    and ``acted``: the mean absolute change each edit made to the pattern rows it targets.
    The redirect arms edit one value token per held-out sequence that has another assignment
    (``redirect=False`` skips them: two fewer Layer-1 forwards). ``clean``: the clean run's
    ``circuits.layer1_activations`` on ``tokens`` where the caller has them (the same bits: one forward fewer).
    """
    B, T = tokens.shape
    c = components
    vals = value_positions(tokens, model.vocab)
    b, t = vals.nonzero(as_tuple=True)
    var_id = tokens[b, t - 1] - model.cfg.first_var
    attn_out, pattern = (clean["attn_out"], clean["pattern"]) if clean else _layer1_out(model, tokens, components=c)
    in_train = torch.from_numpy(numpy_rng(seed, "identity probe split").random(B) < 0.5)
    train = in_train[b]
    probe = RidgeProbe(attn_out[b, t][train], var_id[train])
    v = var_id[~train]
    mask = torch.zeros(B, T, dtype=torch.bool)  # the held-out value tokens, in the order of v
    mask[b[~train], t[~train]] = True
    prev_key = torch.full((B, T), -1, dtype=torch.long)
    prev_key[b[~train], t[~train]] = t[~train] - 1

    # the redirect arms: in each held-out sequence with two or more assignments, one value token t0
    # and another assignment's value token d (variable w at d - 1)
    g = torch_generator(seed, "identity_edits.redirect")
    scores = torch.rand(B, T, generator=g) * vals * ~in_train[:, None]
    top = scores.topk(2, dim=-1)
    rb = (top.values[:, 1] > 0).nonzero().squeeze(1)
    t0, d = top.indices[rb, 0], top.indices[rb, 1]
    w = tokens[rb, d - 1] - model.cfg.first_var
    r_mask = torch.zeros(B, T, dtype=torch.bool)
    r_mask[rb, t0] = True
    target_var = torch.full((B, T), -1, dtype=torch.long)
    target_var[rb, t0] = d - 1

    def edited(keys, m, mode):
        """The probe's reading at rows ``m`` with those rows of the pattern edited (``_rows_to``), and
        ``acted``: the mean absolute change the edit made to them."""

        def edits_for(rows):  # per sequence: each piece gets its own rows of the mask and the keys
            k, mr = keys[rows], m[rows]
            if not mr.any():  # no targeted row in this piece: nothing to edit there
                return []
            return [Replace(Site(c.PATTERN_1, positions=mr), lambda p, hook: _rows_to(p, k, mr, mode, c.prev_head))]

        acts, new_pattern = _layer1_out(model, tokens, edits_for, components=c)
        return probe.predict(acts[m]), float((new_pattern - pattern)[m].abs().sum(-1).mean())

    prev, acted_prev = edited(prev_key, mask, "remove")
    other, acted_other = edited(prev_key, mask, "dilute")
    if redirect and len(rb):
        red, acted_red = edited(target_var, r_mask, "onehot")
        red_val, acted_val = edited(target_var + 1, r_mask, "onehot")  # d, the assignment's value token
    else:
        red = red_val = w = torch.zeros(0, dtype=torch.long)
        acted_red = acted_val = 0.0
    return {
        "clean": probe.predict(attn_out[mask]) == v,
        "previous_removed": prev == v,
        "diluted": other == v,
        "redirect": red == w,
        "redirect_value": red_val == w,
        "acted": {
            "previous_removed": acted_prev,
            "diluted": acted_other,
            "redirect": acted_red,
            "redirect_value": acted_val,
        },
        "chance": 1.0 / model.cfg.n_vars,
    }


def _variable_operand(tokens: torch.Tensor, first_var: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A random operand of each sequence (0: LHS, 1: RHS), the variable one where only one is:
    (pick (B,), whether the picked operand is a variable (B,))."""
    is_var = tokens[:, [POS_LHS, POS_RHS]] >= first_var
    rows = torch.arange(len(tokens))
    pick = torch.randint(0, 2, (len(tokens),), generator=g)
    pick = torch.where(is_var[rows, pick], pick, 1 - pick)
    return pick, is_var[rows, pick]


# ----- Layer 2 QK: where `=` attends after an identity swap ----------------------------------------------
def identity_swap_attention(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    *,
    seed: int,
    wrong_site: bool = False,
    components: Components = PAPER,
) -> dict:
    """Swap Layer 1's output between the value token p of a variable operand and the value token d of
    a distractor assignment (same sequence), and read Layer 2's attention from `=`.

    The claim: `=` finds its operand by the identity Layer 1 wrote, so after the swap it attends to d
    more than to p (``moved``: pattern_2[15, d] > pattern_2[15, p]); before it, to p more than to d
    (``clean``); "more" means also at least twice a uniform pattern's weight on one key (2/16), so a
    flattened attention cannot pass on rounding-size differences. ``wrong_site`` swaps at the two
    variable tokens (p - 1, d - 1) instead: an edit that acts (it exchanges two different activations)
    where the claim says `=` does not look, so the attention must not move. Sequences with no variable operand or no distractor are dropped.
    Returns per-sequence ``moved``, ``clean``, the answer after the swap (``answer_moved``: the
    distractor's value z plus the other operand), ``acted`` and ``dropped``.
    """
    ATTN_OUT_1, PATTERN_2 = components.ATTN_OUT_1, components.PATTERN_2
    N = model.cfg.d_vocab_out
    B = len(tokens)
    g = torch_generator(seed, "identity_swap")
    src = operand_sources(tokens, model.vocab)
    pick, picked_var = _variable_operand(tokens, model.cfg.first_var, g)
    rows = torch.arange(B)
    p, other = src[rows, pick], src[rows, 1 - pick]
    vals = value_positions(tokens, model.vocab)
    vals[rows[:, None], src.clamp(min=0)] = False  # distractor values only
    d = (torch.rand(vals.shape, generator=g) * vals).argmax(dim=1)
    z, x, y = tokens[rows, d], tokens[rows, p], tokens[rows, other]
    keep = (vals.any(dim=1) & picked_var & (z != x)).nonzero().squeeze(1)
    tokens, p, d, z, y = tokens[keep], p[keep], d[keep], z[keep], y[keep]
    k = torch.arange(len(keep))
    at = torch.stack([p, d], 1) - (1 if wrong_site else 0)
    swap = Patch(Site(ATTN_OUT_1, positions=at), tokens, source_positions=at.flip(1))  # each reads the other
    clean = run(model, tokens, [], read=[PATTERN_2, ATTN_OUT_1], last_only=True)
    out = run(model, tokens, [swap], read=[PATTERN_2, ATTN_OUT_1], last_only=True)
    before, after = (fetching_pattern(r.activations[PATTERN_2], components)[:, POS_EQ] for r in (clean, out))
    changed = (out.activations[ATTN_OUT_1] - clean.activations[ATTN_OUT_1])[k[:, None], at].norm(dim=-1)
    # Scale matters: `=` must prefer d clearly, not by a rounding-size margin of a flat pattern.
    clear = 2.0 / tokens.shape[1]  # twice the weight a uniform pattern gives one key
    return {
        "moved": (after[k, d] > after[k, p]) & (after[k, d] >= clear),
        "clean": (before[k, p] > before[k, d]) & (before[k, p] >= clear),
        "answer_moved": out.last_logits.argmax(-1) == (z + y) % N,
        "acted": float(changed.mean()) if len(keep) else 0.0,
        "dropped": int(B - len(keep)),
    }


# ----- Layer 2 OV: what the MLP input gets from a variable vs a constant ------------------------------------
def value_route_patch(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    *,
    seed: int,
    other_number: bool = False,
    components: Components = PAPER,
) -> dict:
    """Does Layer 2's OV write an operand's value the same way whether it sits at a variable's value
    token or in an operand slot as a constant?

    For each 1-/2-var sequence x pick a variable operand, its value token p (value n), and c(x), the
    same sequence with that operand written as the constant n in its slot s. Patch Layer 2's value
    vector (``blocks.1.attn.hook_v``) at p in x with:
        same   v at s in c(x)  (the same number, arriving by the constant route)
        other  v at the *other* operand's position in x (another number, by its own route)
    and measure r = resid_mid_2 at `=` (the MLP's input). ``other_number`` (the control) takes the
    "same" arm's vector from a c(x) whose constant is another number n' != n: an edit that acts, and
    that the claim predicts moves r as much as another number does. Per sequence
        kept_i = 1 - |r(same) - r(x)| / |r(other) - r(x)|
    is 1 when the constant route's value vector is, for everything downstream, the variable's own,
    and about 0 or below when it is as different as another number is. The "other" arm is the scale,
    (``acted``: mean |r(same) - r(x)|, how much the tested edit moved the MLP input).
    """
    RESID_MID_2, VALUES_2 = components.RESID_MID_2, components.VALUES_2
    B = len(tokens)
    g = torch_generator(seed, "value_route_patch")
    src = operand_sources(tokens, model.vocab)
    slots = torch.tensor([POS_LHS, POS_RHS])
    pick, picked_var = _variable_operand(tokens, model.cfg.first_var, g)
    rows = torch.arange(B)
    keep = picked_var & (src >= 0).all(1) & (tokens[rows, src[:, 0]] != tokens[rows, src[:, 1]])
    keep = keep.nonzero().squeeze(1)
    tokens, pick, src = tokens[keep], pick[keep], src[keep]
    k = torch.arange(len(keep))
    p, q = src[k, pick], src[k, 1 - pick]
    # c(x) for the picked operand only: the constant n in its slot
    const = tokens.clone()
    n = tokens[k, p]
    if other_number:
        n = (n + torch.randint(1, model.cfg.d_vocab_out, (len(keep),), generator=g)) % model.cfg.d_vocab_out
    const[k, slots[pick]] = n

    def r_at_eq(edits):  # r: resid_mid_2 at `=` under ``edits``
        return run(model, tokens, edits, read=[RESID_MID_2], last_only=True).activations[RESID_MID_2][:, POS_EQ]

    clean = r_at_eq([])
    same = r_at_eq([Patch(Site(VALUES_2, positions=p), const, source_positions=slots[pick])])
    other = r_at_eq([Patch(Site(VALUES_2, positions=p), tokens, source_positions=q)])
    moved = (same - clean).norm(dim=-1)
    return {
        "kept": (1 - moved / (other - clean).norm(dim=-1).clamp(min=1e-12)).double(),
        "acted": float(moved.mean()) if len(keep) else 0.0,
        "dropped": int(B - len(keep)),
    }


def ov2_number_basis(
    model: AssignAddTransformer, *, components: Components = PAPER, shares: torch.Tensor | None = None
) -> torch.Tensor:
    """Orthonormal rows (r, d_model) spanning the fetching head's OV images of the numbers, centred: the
    directions in which it writes operand values into the MLP input (what the claim is about). For a role
    of several heads, the images as either operand (``residual.ov2_number_images``), each centred."""
    left, right = ov2_number_images(model, components=components, shares=shares)
    images = left if left is right else torch.cat([left - left.mean(0), right - right.mean(0)])
    U, S, Vh = torch.linalg.svd(images - images.mean(0), full_matrices=False)
    return Vh[S > 1e-6 * max(float(S.max()), 1e-30)]


def _variable_embeddings(model: AssignAddTransformer) -> torch.Tensor:
    """The variable tokens' rows of W_E: (n_vars, d_model)."""
    first = model.cfg.first_var
    return model.embed.W_E[first : first + model.cfg.n_vars]


def _centred_ov(model: AssignAddTransformer, embeddings: torch.Tensor, layer: int, head: int):
    """(E - mean) and W_V W_O of the head, float64: what ``ov_transmission`` and the placements compare."""
    E = embeddings.detach().double()
    a = model.blocks[layer].attn
    return E - E.mean(0), (a.W_V[head] @ a.W_O[head]).detach().double()


def ov_transmission(
    model: AssignAddTransformer, role: str, embeddings: torch.Tensor, *, components: Components = PAPER
) -> float:
    """How strongly a layer's OV circuit passes on a set of embeddings (rows), relative to the other
    directions the layer can read:

        (||(E - mean) W_V W_O||_F^2 / ||E - mean||_F^2) / (||R W_V W_O||_F^2 / r)

    ``role``: "previous_token_head" (OV_1) or "fetching_head" (OV_2), the head of ``components`` (a
    fetching role of several heads: both norms summed over its heads, what they write together).
    R (r, d_model) is an orthonormal basis of the directions the layer can receive (the span of
    ``interventions.mutants.layer1_inputs`` / ``layer2_inputs``, from the weights) with the span of the
    centred embeddings removed. About 1 for a random OV, and for one whose input space was rotated away
    from the embeddings; well above 1 when the embeddings lie in the circuit's strong input directions
    (a perfect selector, passing the embeddings and nothing else it can read, scores without bound).
    This sees a break that comparisons made *through* the circuit cannot: rotating W_V's input space
    keeps what it writes decodable, but no longer where its reader looks. Averaged over the readable
    directions only, since W_V W_O is fixed by the function only on inputs the layer receives
    (docs/reregistrations/weights_in_a_fixed_basis_2026-12-04.md)."""
    from ...interventions.mutants import layer1_inputs, layer2_inputs, span_basis

    first = role == "previous_token_head"
    c = components
    layer, heads = (c.prev_layer, (c.prev_head,)) if first else (c.fetch_layer, c.fetch_heads)
    ovs = [_centred_ov(model, embeddings, layer, head) for head in heads]
    E = ovs[0][0]
    readable = span_basis(layer1_inputs(model) if first else layer2_inputs(model, c))[0]  # (q, d_model)
    inside = span_basis(E)[0]  # (k, d_model): the centred embeddings' span
    R = span_basis(readable - (readable @ inside.T) @ inside)[0]  # (r, d_model), r = q - k
    # a role of several heads: what they write together, summed over its heads on both sides
    average = sum((R @ W).pow(2).sum() for _, W in ovs) / max(R.shape[0], 1)
    return float(sum((E @ W).pow(2).sum() for _, W in ovs) / E.pow(2).sum() / average.clamp(min=1e-30))


def ov2_number_transmission(model: AssignAddTransformer, *, components: Components = PAPER) -> float:
    """``ov_transmission`` of the fetching head's OV for the number embeddings (what it must copy to `=`)."""
    return ov_transmission(model, "fetching_head", model.embed.W_E[: model.cfg.d_vocab_out], components=components)


def ov1_variable_transmission(model: AssignAddTransformer, *, components: Components = PAPER) -> float:
    """``ov_transmission`` of the previous-token head's OV for the variable embeddings (what it must
    copy to value tokens)."""
    return ov_transmission(model, "previous_token_head", _variable_embeddings(model), components=components)


def ov1_variables_against_placements(
    model: AssignAddTransformer, *, seed: int, draws: int = 1000, components: Components = PAPER
) -> tuple[torch.Tensor, float, torch.Tensor]:
    """Is the place of the variables in Layer 1's input space special to its OV circuit?

    The variables' gain ``ov1_variable_transmission`` is compared with the same statistic for the same
    embeddings placed in ``draws`` Haar-random parts of the space Layer 1 can read: with the centred
    variable embeddings E = U Σ V^T (k = rank rows of V^T) and a random orthonormal S (k, d_model)
    inside the readable span (an orthonormal basis P, (q, d_model)),

        null = (||Σ S OV_1||_F^2 / ||Σ||_F^2) / ((||P OV_1||_F^2 - ||S OV_1||_F^2) / (q - k))

    (the variables' own gain is this with S = V^T). A trained head passes the variables on more strongly
    than nearly every other placement; a re-initialised one, or one whose input space was rotated, does
    not. Only the function-fixed part of OV_1 (its action on readable inputs) enters, as in
    ``ov_transmission``. Returns (below (draws,) bool: null below the variables' gain, the variables'
    gain, the null gains (draws,))."""
    from ...interventions.mutants import layer1_inputs, span_basis

    E, W = _centred_ov(model, _variable_embeddings(model), components.prev_layer, components.prev_head)
    P = span_basis(layer1_inputs(model))[0]  # (q, d_model)
    sigma = torch.linalg.svdvals(E)
    sigma = sigma[sigma > 1e-5 * sigma.max()]  # (k,)
    q, k = P.shape[0], sigma.shape[0]
    B = P @ W  # (q, d_model): OV_1 on the readable basis
    total = B.pow(2).sum()
    g = torch_generator(seed, "ov1 random placements")
    Q = torch.linalg.qr(torch.randn(draws, q, k, generator=g, dtype=torch.float64)).Q  # (draws, q, k)
    SB = Q.transpose(1, 2) @ B  # (draws, k, d_model): OV_1 on each placement's basis
    placed = (sigma[None, :, None] * SB).pow(2).sum((1, 2)) / sigma.pow(2).sum()
    rest = (total - SB.pow(2).sum((1, 2))) / (q - k)
    null = placed / rest.clamp(min=1e-30)
    gain = ov1_variable_transmission(model, components=components)
    return null < gain, gain, null
