"""Causal scrubbing of the paper's circuit (Chan et al., Redwood Research, 2022), in two parts.

A hypothesis says what an activation depends on. Scrubbing replaces that activation, example by
example, with its value on another input the hypothesis calls equivalent (one that agrees on every
feature the hypothesis says matters); if the hypothesis is right, the model's accuracy survives.
What survives is measured against the model's own accuracy and against a floor where the same
activation is resampled with no feature kept.

The two parts of the paper's algorithm, each scrubbed where its output is read:

    routing   Layer 1's output at positions 0-14 (``blocks.0.hook_attn_out``) is resampled from
              same-batch cells that agree on what a correspondence says it carries:
              "hypothesis" (version 2, registered 2026-12-01): at a value token, its position and the
                  variable before it; elsewhere its position, its token and the variable at t-1 if
                  any (the previous-token head copies t-1's identity wherever it attends);
              "paper" (version 1): at a value token as the hypothesis; elsewhere position and token;
              "position_only" (wrong): value tokens carry only their position; elsewhere as the
                  hypothesis;
              "none": position only, everywhere (the floor).
    addition  Layer 2's output at `=` depends only on the two operand values, however they arrived
              (constants, variables, any prefix): patch ``blocks.1.hook_attn_out`` at `=` from a
              freshly built sequence with the same operand values and a random form ("first_operand_only",
              wrong: only the first value kept; "none": neither, the floor).

The pools both scrubs are judged on (``whole_algorithm``, and along a series) are held-out pairs and
restricted slots, whose answers cannot have been memorised.
"""

from __future__ import annotations

import numpy as np
import torch

from ...data import KIND_0VAR, KIND_1VAR_LHS, KIND_1VAR_RHS, KIND_2VAR, POS_EQ, build_sequences, operand_sources
from ...data.tokens import POS_LHS, POS_PLUS, POS_RHS
from ...interventions import Patch, Replace, Site, run
from ...model.components import PAPER, Components
from ...random_streams import numpy_rng, torch_generator

POOLS = ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair", "1var_restricted_slot", "2var_restricted_1")
ROUTING_FEATURES = ("hypothesis", "paper", "position_only", "none")
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


def _value_tokens(tokens: torch.Tensor, first_var: int) -> torch.Tensor:
    """(B, T) bool: the prefix positions right after a variable that hold no variable (value tokens)."""
    is_var = tokens >= first_var
    value_tok = torch.zeros_like(is_var)
    value_tok[:, 1:] = is_var[:, :-1] & ~is_var[:, 1:] & (torch.arange(1, tokens.shape[1]) < POS_PLUS)
    return value_tok


def routing_keys(tokens: torch.Tensor, cfg, features: str) -> torch.Tensor:
    """(B, T) integer keys: two cells may stand in for each other under ``features`` exactly when their
    keys are equal (``ROUTING_FEATURES``). Meaningful at positions 0-14."""
    B, T = tokens.shape
    first_var, vocab = cfg.first_var, cfg.d_vocab
    value_tok = _value_tokens(tokens, first_var)
    pos = torch.arange(T).expand(B, T)
    prev = torch.cat([torch.zeros(B, 1, dtype=torch.long), tokens[:, :-1]], 1)
    prev_var = torch.where(prev >= first_var, prev - first_var + 1, 0)  # 0: no variable at t-1
    # value tokens and other cells get disjoint key ranges: negative for value tokens
    at_value = -(pos * (vocab + 1) + prev_var) - 1  # (position, variable before it)
    elsewhere = (pos * vocab + tokens) * (vocab + 1) + prev_var  # (position, token, variable at t-1)
    if features == "hypothesis":
        return torch.where(value_tok, at_value, elsewhere)
    if features == "paper":
        return torch.where(value_tok, at_value, pos * vocab + tokens)
    if features == "position_only":
        return torch.where(value_tok, -pos - 1, elsewhere)
    return pos.clone()


def routing_scrub(
    model, tokens: torch.Tensor, labels: torch.Tensor, *, seed: int, features: str, components: Components = PAPER
) -> dict:
    """Accuracy with Layer 1's output at positions 0-14 resampled from cells that share what ``features``
    says they carry. Returns {"correct": (B,), "acted": the mean change (L2 norm) over every resampled
    cell, "change": (B,) each sequence's mean change, so that one pool's rows can show their edit acted}."""
    if features not in ROUTING_FEATURES:
        raise ValueError(f"features must be one of {ROUTING_FEATURES}")
    B, T = tokens.shape
    key = routing_keys(tokens, model.cfg, features)
    scrubbed = torch.zeros(B, T, dtype=torch.bool)
    scrubbed[:, : POS_RHS + 1] = True
    flat = torch.arange(B * T).reshape(B, T)[scrubbed]
    donor = _donors(key[scrubbed], torch_generator(seed, f"routing_scrub.{features}"))
    ATTN_OUT_1 = components.ATTN_OUT_1
    clean = run(model, tokens, [], read=[ATTN_OUT_1], stop_at_layer=components.prev_layer + 1).activations[ATTN_OUT_1]
    source = clean.reshape(B * T, -1)[flat[donor]]  # (n, D)
    new = clean.clone()
    new[scrubbed] = source

    resampled = Replace(Site(ATTN_OUT_1, positions=scrubbed), lambda act, hook: new.to(act.dtype))
    out = run(model, tokens, [resampled], last_only=True)
    acted = float((new - clean)[scrubbed].norm(dim=-1).mean())
    change = (new - clean)[:, : POS_RHS + 1].norm(dim=-1).mean(-1)  # (B,): every row has cells 0-14 scrubbed
    return {"correct": out.last_logits.argmax(-1) == labels, "acted": acted, "change": change}


def _same_values_sequences(
    values: torch.Tensor, task, rng: np.random.Generator, first_only: bool = False
) -> torch.Tensor:
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


def addition_scrub(
    model, tokens: torch.Tensor, labels: torch.Tensor, task, *, seed: int, features: str, components: Components = PAPER
) -> dict:
    """Accuracy with Layer 2's output at `=` patched from a fresh sequence that keeps ``features`` of the
    base's operand values. Returns {"correct": (B,), "acted": the mean change (L2 norm) at `=`, "change":
    (B,) each sequence's change at `=`}."""
    if features not in ADDITION_FEATURES:
        raise ValueError(f"features must be one of {ADDITION_FEATURES}")
    rng = numpy_rng(seed, f"addition scrub donors: {features}")
    src = operand_sources(tokens, model.vocab)
    rows = torch.arange(len(tokens))
    values = torch.stack([tokens[rows, src[:, 0]], tokens[rows, src[:, 1]]], 1)
    if features == "none":
        values = torch.from_numpy(rng.integers(0, task.vocab.modulus, size=(len(tokens), 2)))
    donors = _same_values_sequences(values, task, rng, first_only=features == "first_operand_only")
    ATTN_OUT_2 = components.ATTN_OUT_2
    clean = run(model, tokens, [], read=[ATTN_OUT_2], last_only=True).activations[ATTN_OUT_2][:, POS_EQ]
    out = run(model, tokens, [Patch(Site(ATTN_OUT_2, positions=POS_EQ), donors)], read=[ATTN_OUT_2], last_only=True)
    change = (out.activations[ATTN_OUT_2][:, POS_EQ] - clean).norm(dim=-1)  # (B,)
    return {"correct": out.last_logits.argmax(-1) == labels, "acted": float(change.mean()), "change": change}


# ----- the correspondence part by part: minimality and completeness ---------------------------------
#
# The hypothesis as parts (``PARTS``), each an activation (``part_hooks``) and what it carries (the table:
# docs/claims/whole_algorithm.md), plus one statement with no part to remove: Layer 2's value vectors
# anywhere else (distractors, PADs, variables) carry nothing `=` reads. A run re-reads each hook's
# activation through a donor map in one forward, so a donor is scrubbed too.
ALL_CELLS = "every cell the plan moves"
PARTS = (
    "non_value_tokens",
    "value_token_identity",
    "eq_operand_identity",
    "lhs_value_read",
    "rhs_value_read",
    "mlp_adds",
)


def part_hooks(components: Components = PAPER) -> dict[str, str]:
    """The activation each part is, at the ``components``' sites: {part: hook name}."""
    return {
        "non_value_tokens": components.ATTN_OUT_1,
        "value_token_identity": components.ATTN_OUT_1,
        "eq_operand_identity": components.ATTN_OUT_1,
        "lhs_value_read": components.VALUES_2,
        "rhs_value_read": components.VALUES_2,
        "mlp_adds": components.MLP_OUT_2,
    }


def _pick(
    target_key: torch.Tensor,
    target_self: torch.Tensor,
    candidate_key: torch.Tensor,
    gen: torch.Generator,
    *,
    target_carry: torch.Tensor | None = None,
    candidate_carry: torch.Tensor | None = None,
    tries: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each target, a random candidate with the same key, never the target itself
    (``target_self``: its index among the candidates, -1 if it is none). With ``target_carry`` (n, c)
    and ``candidate_carry`` (m, c): a candidate whose carry differs from the target's in every column
    where the target's is >= 0 (-1: nothing carried there). Returns (candidate index (n,), found (n,));
    a target with no such candidate gets itself (or -1 when it is no candidate) and found False."""
    n = len(target_key)
    order = torch.argsort(candidate_key, stable=True)
    sk = candidate_key[order]
    lo = torch.searchsorted(sk, target_key)
    size = torch.searchsorted(sk, target_key, right=True) - lo
    idx = target_self.clone()
    found = torch.zeros(n, dtype=torch.bool)
    pending = size > 0
    for _ in range(tries):
        if not pending.any():
            break
        u = torch.rand(n, generator=gen)
        cand = order[(lo + (u * size).long().clamp(max=(size - 1).clamp(min=0))).clamp(max=len(order) - 1)]
        ok = pending & (cand != target_self)
        if target_carry is not None:
            tc, cc = target_carry, candidate_carry[cand]
            ok &= ((cc != tc) | (tc < 0)).all(dim=-1)
        idx = torch.where(ok, cand, idx)
        found |= ok
        pending &= ~ok
    for i in pending.nonzero().flatten().tolist():  # rare: scan the whole group
        group = order[lo[i] : lo[i] + size[i]]
        good = group != target_self[i]
        if target_carry is not None:
            good &= ((candidate_carry[group] != target_carry[i]) | (target_carry[i] < 0)).all(dim=-1)
        if good.any():
            idx[i] = group[good][torch.randint(int(good.sum()), (1,), generator=gen)]
            found[i] = True
    return idx, found


def _differing(n_cells: int, cells, key, carry, gen: torch.Generator, candidates=None) -> tuple[torch.Tensor, float]:
    """A donor map (n_cells,) in which each of ``cells`` reads a cell with the same ``key`` whose ``carry``
    differs (``_pick``), and the share of cells that found one. ``candidates``: (cells, key, carry, each
    target's index among them or -1), by default the targets themselves."""
    cand_cells, cand_key, cand_carry, self_index = candidates or (cells, key, carry, torch.arange(len(cells)))
    d, ok = _pick(key, self_index, cand_key, gen, target_carry=carry, candidate_carry=cand_carry)
    m = torch.arange(n_cells)
    m[cells[ok]] = cand_cells[d[ok]]
    return m, float(ok.double().mean()) if len(ok) else 0.0


def _value_token_cells(tokens: torch.Tensor, first_var: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``value_token_identity`` part: the value tokens' flat cells b * T + t (k,), their positions
    (k,), and what each carries, the variable before it (k, 1)."""
    b, t = _value_tokens(tokens, first_var).nonzero(as_tuple=True)
    return b * tokens.shape[1] + t, t, tokens[b, t - 1][:, None]


def scrub_plans(
    model, tokens: torch.Tensor, labels: torch.Tensor, *, seed: int, components: Components = PAPER
) -> dict:
    """Donor maps, within one batch, for the full hypothesis scrub C (every part resampled from a cell that
    agrees on what it carries, everything else from a cell at the same position), its fresh redraw (the
    placebo C') and each part removed (resampled from cells that differ in what it carries).

    Returns {"hypothesis": {hook: map}, "redrawn": {hook: map}, "removed": {part: {hook: map}},
    "targets": {part: flat cells}, "removed_share": {part: share of its cells given a differing donor}}.
    A map is a LongTensor (B * T,) of the flat cell each cell reads; the identity leaves a cell alone.
    ``removed[part]`` holds only that part's cells (apply it over a plan, or alone on the clean model)."""
    ATTN_OUT_1, VALUES_2, MLP_OUT_2 = components.ATTN_OUT_1, components.VALUES_2, components.MLP_OUT_2
    cfg, tok = model.cfg, tokens
    B, T = tokens.shape
    V2 = 2 * cfg.d_vocab
    ident = torch.arange(B * T)
    flat = ident.reshape(B, T)
    pos = torch.arange(T).expand(B, T)
    is_var = tokens >= cfg.first_var
    value_tok = _value_tokens(tokens, cfg.first_var)
    prefix = torch.zeros(B, T, dtype=torch.bool)
    prefix[:, : POS_RHS + 1] = True
    routing_key = routing_keys(tokens, cfg, "hypothesis")
    # `=` keyed by the form (which slots hold a variable) and the operand variables (-1: a constant)
    slot_var = torch.where(is_var[:, [POS_LHS, POS_RHS]], tokens[:, [POS_LHS, POS_RHS]], -1)
    form = is_var[:, POS_LHS].long() * 2 + is_var[:, POS_RHS].long()
    eq_cells = flat[:, POS_EQ]
    eq_key = form * (V2 * V2) + (slot_var[:, 0] + 1) * V2 + (slot_var[:, 1] + 1)
    # cells holding a number `=` could read as an operand: value tokens and constant operand slots
    number_cell = value_tok | ((pos >= POS_PLUS + 1) & (pos <= POS_RHS) & (tokens < cfg.d_vocab_out))
    num_cells = flat[number_cell]
    num_pos, num_tok = pos[number_cell], tok[number_cell]
    cand_index = torch.full((B * T,), -1)
    cand_index[num_cells] = torch.arange(len(num_cells))
    src = operand_sources(tokens, model.vocab)
    src_cells = [flat[torch.arange(B), src[:, k]] for k in (0, 1)]
    is_source = torch.zeros_like(is_var)
    is_source[torch.arange(B)[:, None], src] = True  # both operands' sources
    other = prefix & ~is_source
    other_cells = flat[other]

    def same(label: str, redraw: bool) -> dict:
        g = torch_generator(seed, f"scrub_plan.{label}{'.redrawn' if redraw else ''}")
        l1 = ident.clone()
        cells = flat[prefix]
        # Layer 1 at positions 0-14: exactly the routing scrub's draw ("hypothesis" features)
        gen1 = torch_generator(seed, "routing_scrub.hypothesis") if not redraw else g
        l1[cells] = cells[_donors(routing_key[prefix], gen1)]
        d, _ = _pick(eq_key, torch.arange(B), eq_key, g)
        l1[eq_cells] = eq_cells[d]
        v2 = ident.clone()
        v2[other_cells] = other_cells[_donors(pos[other], g)]
        for k in (0, 1):
            key = pos.reshape(-1)[src_cells[k]] * cfg.d_vocab + tok.reshape(-1)[src_cells[k]]
            d, _ = _pick(key, cand_index[src_cells[k]], num_pos * cfg.d_vocab + num_tok, g)
            v2[src_cells[k]] = num_cells[d]
        plan = {ATTN_OUT_1: l1, VALUES_2: v2}
        if redraw:  # the MLP's output from a sequence with the same sum
            mlp = ident.clone()
            d, _ = _pick(labels, torch.arange(B), labels, g)
            mlp[eq_cells] = eq_cells[d]
            plan[MLP_OUT_2] = mlp
        return plan

    g = torch_generator(seed, "scrub_plan.removed")
    removed, targets, share = {}, {}, {}

    def remove(part, hook, cells, key, carry, candidates=None):
        m, share[part] = _differing(B * T, cells, key, carry, g, candidates)
        removed[part], targets[part] = {hook: m}, cells

    nv = prefix & ~value_tok
    # what a non-value cell carries (hypothesis version 2): its token and the variable at t-1 (-1: none)
    prev = torch.cat([torch.full((B, 1), -1, dtype=torch.long), tokens[:, :-1]], 1)
    prev_var = torch.where(prev >= cfg.first_var, prev, torch.full_like(prev, -1))
    remove("non_value_tokens", ATTN_OUT_1, flat[nv], pos[nv], torch.stack([tok[nv], prev_var[nv]], -1))
    remove("value_token_identity", ATTN_OUT_1, *_value_token_cells(tokens, cfg.first_var))
    remove("eq_operand_identity", ATTN_OUT_1, eq_cells, form, slot_var)
    for k, part in enumerate(("lhs_value_read", "rhs_value_read")):
        cells = src_cells[k]
        candidates = (num_cells, num_pos, num_tok[:, None], cand_index[cells])
        remove(part, VALUES_2, cells, pos.reshape(-1)[cells], tok.reshape(-1)[cells][:, None], candidates)
    remove("mlp_adds", MLP_OUT_2, eq_cells, torch.zeros(B, dtype=torch.long), labels[:, None])
    plans = {"hypothesis": same("hypothesis", False), "redrawn": same("hypothesis", True)}
    return {**plans, "removed": removed, "targets": targets, "removed_share": share}


def combine(*plans: dict) -> dict:
    """Donor maps applied together: a later plan's moved cells override an earlier plan's."""
    out: dict = {}
    for plan in plans:
        for hook, m in plan.items():
            if hook not in out:
                out[hook] = m.clone()
            else:
                moved = m != torch.arange(len(m))
                out[hook][moved] = m[moved]
    return out


def run_plan(model, tokens: torch.Tensor, labels: torch.Tensor, plan: dict, measure: dict | None = None) -> dict:
    """One forward of ``tokens`` in which each hook's activation is re-read through its donor map.
    ``measure``: {name: (hook, flat cells)} whose mean change (L2 norm per cell) to report as acted;
    ``acted[ALL_CELLS]`` is the mean change over every cell the plan moves, at every hook.
    Returns {"correct": (B,), "acted": {name: float}}."""
    B, T = tokens.shape
    ident = torch.arange(B * T)
    acted: dict = {}
    total = []  # (sum of changes, cells) per hook
    edits = []
    for hook, donor in plan.items():
        moved = donor != ident
        if not moved.any():
            continue
        wanted = [(name, cells) for name, (h, cells) in (measure or {}).items() if h == hook]

        def fn(act, _hook, donor=donor, wanted=wanted, moved=moved):
            flat_act = act.reshape(B * T, -1)
            new = flat_act[donor]
            for name, cells in wanted:
                acted[name] = float((new[cells] - flat_act[cells]).norm(dim=-1).mean()) if len(cells) else 0.0
            total.append((float((new[moved] - flat_act[moved]).norm(dim=-1).sum()), int(moved.sum())))
            return new.reshape(act.shape)

        edits.append(Replace(Site(hook, positions=moved.reshape(B, T)), fn))
    logits = run(model, tokens, edits, last_only=True).last_logits
    for name in measure or {}:
        acted.setdefault(name, 0.0)
    acted[ALL_CELLS] = sum(t for t, _ in total) / max(sum(c for _, c in total), 1)
    return {"correct": logits.argmax(-1) == labels, "acted": acted}


def identity_removed(model, tokens: torch.Tensor, *, seed: int, label: str) -> torch.Tensor:
    """The donor map for Layer 1's ``hook_attn_out`` (the paper's ``blocks.0.hook_attn_out``) that removes
    the variable identity at value tokens: each value token reads a value token at the same position after another variable (the
    ``value_token_identity`` part removed, alone)."""
    gen = torch_generator(seed, label)
    return _differing(tokens.numel(), *_value_token_cells(tokens, model.cfg.first_var), gen)[0]
