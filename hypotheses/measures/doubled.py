"""Held-out doubled pairs (n, n): is a wrong answer the routing's fault or the addition module's?

Every trained model we know (the paper's final checkpoint included) errs on held-out pairs almost
only where the two numbers are equal. The answer is computed in two stages (SPEC §6): the routing
(Layer 1, Layer 2's attention) delivers the two operand values to `=` as ``blocks.1.hook_attn_out``
there; the addition module (Layer 2's MLP and the unembedding, reading ``resid_mid`` at `=`) turns
them into the sum. The intervention here is on the addition module's input: Layer 2's output at `=`
of a variable sequence is replaced by its output in the *constant twin* (the same tokens with the
core `+ n1 n2 =`, the operands as constants, so the routing is the trivial one: `=` reads slots 13,
14), and the answer, the module's output, is read. An error that a perfectly routed input does not
fix is the addition module's; one it fixes was the routing's.

Measured on variable sequences (1-var either slot, 2-var) of every held-out doubled pair, and, as the
contrast where the same procedure must give the right answer, on as many of non-doubled held-out
pairs in the same forms.
"""

from __future__ import annotations

import numpy as np
import torch

from ...data import KIND_1VAR_LHS, KIND_1VAR_RHS, KIND_2VAR, POS_EQ, build_sequences, operand_sources
from ...data.sequences import labels_for
from ...data.tokens import POS_LHS, POS_RHS
from ...interventions import Replace, Site, run
from ...model.components import PAPER, Components
from ...random_streams import numpy_rng
from .circuits import fetch_operand_shares, fetching_pattern, last_position_correct, ov2_mlp2_accuracy

PER_PAIR_AND_FORM = 4  # sequences per held-out doubled pair and form (1-var LHS, 1-var RHS, 2-var)
FORMS = (KIND_1VAR_LHS, KIND_1VAR_RHS, KIND_2VAR)


def doubled_sets(task, seed: int, per_pair_and_form: int = PER_PAIR_AND_FORM) -> dict | None:
    """Variable sequences of every held-out doubled pair (``per_pair_and_form`` per pair and form) and
    as many of random non-doubled held-out pairs in the same forms; their constant twins. None when the
    task holds out no doubled pair (or no other pair)."""
    held = np.array(sorted(task.heldout_pairs), dtype=np.int64).reshape(-1, 2)
    dbl = held[held[:, 0] == held[:, 1]]
    other = held[held[:, 0] != held[:, 1]]
    if len(dbl) == 0 or len(other) == 0:
        return None
    rng = numpy_rng(seed, "doubled pair sets")
    k = per_pair_and_form
    kind = np.tile(np.repeat(np.array(FORMS), k), len(dbl))  # (P * 3k,)
    n = len(kind)
    pairs = np.concatenate([np.repeat(dbl, 3 * k, axis=0), other[rng.integers(0, len(other), size=n)]])
    kind = np.concatenate([kind, kind])
    lv = task.allowed_lhs_vars[rng.integers(0, len(task.allowed_lhs_vars), size=2 * n)]
    rv = task.allowed_rhs_vars[rng.integers(0, len(task.allowed_rhs_vars), size=2 * n)]
    vp = task.valid_var_pairs[rng.integers(0, len(task.valid_var_pairs), size=2 * n)]
    var1 = np.select([kind == KIND_1VAR_LHS, kind == KIND_2VAR], [lv, vp[:, 0]], default=-1)
    var2 = np.select([kind == KIND_1VAR_RHS, kind == KIND_2VAR], [rv, vp[:, 1]], default=-1)
    tokens = torch.from_numpy(build_sequences(kind, var1, var2, pairs[:, 0], pairs[:, 1], rng, task.vocab))
    labels = torch.from_numpy(labels_for(pairs[:, 0], pairs[:, 1], task.vocab.modulus))
    twins = tokens.clone()
    twins[:, POS_LHS] = torch.from_numpy(pairs[:, 0])
    twins[:, POS_RHS] = torch.from_numpy(pairs[:, 1])
    doubled = torch.zeros(2 * n, dtype=torch.bool)
    doubled[:n] = True
    return {"tokens": tokens, "labels": labels, "twins": twins, "doubled": doubled, "pairs": torch.from_numpy(pairs)}


def ideal_input_runs(
    model, sets: dict, break_routing: torch.Tensor | None = None, *, components: Components = PAPER
) -> dict:
    """The model's answers on the sequences, and with Layer 2's output at `=` replaced by the constant
    twin's (the addition module fed a perfectly routed input). ``break_routing``: a donor map for
    ``blocks.0.hook_attn_out`` (``scrubbing.scrub_plans``' removed value-token identity) applied in
    both runs, for the control in which the routing, not the adder, is broken.
    Returns per-sequence tensors and ``acted`` (mean change of what the edits target)."""
    c = components
    ATTN_OUT_1, ATTN_OUT_2, PATTERN_2 = c.ATTN_OUT_1, c.ATTN_OUT_2, c.PATTERN_2
    tokens, labels, twins = sets["tokens"], sets["labels"], sets["twins"]
    B, T = tokens.shape
    twin = run(model, twins, [], read=[ATTN_OUT_2], last_only=True)
    ideal_out = twin.activations[ATTN_OUT_2][:, POS_EQ]
    acted = {}
    extra_edits = []
    if break_routing is not None:
        moved = break_routing != torch.arange(B * T)

        def broken(act, hook):
            flat = act.reshape(B * T, -1)
            new = flat[break_routing]
            acted["routing_broken"] = float((new[moved] - flat[moved]).norm(dim=-1).mean()) if moved.any() else 0.0
            return new.reshape(act.shape)

        extra_edits = [Replace(Site(ATTN_OUT_1, positions=moved.reshape(B, T)), broken)]

    def feed_ideal(act, hook):
        new = act.clone()
        acted["ideal_input"] = float((ideal_out.to(act.dtype) - act[:, POS_EQ]).norm(dim=-1).mean())
        new[:, POS_EQ] = ideal_out.to(act.dtype)
        return new

    base = run(model, tokens, extra_edits, read=[PATTERN_2], last_only=True)
    fed = run(model, tokens, extra_edits + [Replace(Site(ATTN_OUT_2, positions=POS_EQ), feed_ideal)], last_only=True)
    src = operand_sources(tokens, model.vocab)
    rows = torch.arange(B)
    eq_row = fetching_pattern(base.activations[PATTERN_2], c)[:, POS_EQ]  # (B, T)
    on_operands = eq_row[rows, src[:, 0]] + eq_row[rows, src[:, 1]]
    answer, fed_answer = base.last_logits.argmax(-1), fed.last_logits.argmax(-1)
    shares = fetch_operand_shares(base.activations[PATTERN_2], tokens, c) if len(c.fetch_heads) > 1 else None
    _, adder_table = ov2_mlp2_accuracy(model, components=c, shares=shares)
    pairs = sets["pairs"]
    return {
        "model_ok": answer == labels,
        "ideal_ok": fed_answer == labels,
        "unchanged": fed_answer == answer,
        "twin_ok": twin.last_logits.argmax(-1) == labels,
        "eq_weight_on_operands": on_operands,
        "adder_weights_only_ok": adder_table[pairs[:, 0], pairs[:, 1]],
        "acted": acted,
    }


def summary(r: dict, mask: torch.Tensor) -> dict:
    """Rates over the sequences in ``mask`` (JSON-able)."""

    def m(x):
        x = x[mask]
        return float(x.double().mean()) if len(x) else None

    wrong = mask & ~r["model_ok"]
    return {
        "sequences": int(mask.sum()),
        "model_accuracy": m(r["model_ok"]),
        "ideal_input_accuracy": m(r["ideal_ok"]),
        "constant_twin_accuracy": m(r["twin_ok"]),
        "answer_unchanged_by_ideal_input": m(r["unchanged"]),
        "model_errors": int(wrong.sum()),
        "errors_fixed_by_ideal_input": float(r["ideal_ok"][wrong].double().mean()) if wrong.any() else None,
        "eq_weight_on_operand_values": m(r["eq_weight_on_operands"]),
        "weights_only_adder_accuracy": m(r["adder_weights_only_ok"]),
    }


def per_doubled_pair(r: dict, sets: dict) -> dict:
    """{n: [model accuracy, ideal-input accuracy, weights-only adder right (0/1)]} over doubled pairs."""
    out = {}
    pairs = sets["pairs"]
    for n in torch.unique(pairs[sets["doubled"], 0]).tolist():
        sel = sets["doubled"] & (pairs[:, 0] == n)
        out[str(n)] = [
            float(r["model_ok"][sel].double().mean()),
            float(r["ideal_ok"][sel].double().mean()),
            float(r["adder_weights_only_ok"][sel][0]),
        ]
    return out


def heldout_constants_with_and_without_doubled(model, task, seed: int) -> dict:
    """The paper's 99.4% is accuracy on held-out pairs as constants: every held-out pair once (0-var),
    with and without its doubled pairs."""
    tokens, labels = task.exhaustive_0var_heldout(seed=seed)
    ok = last_position_correct(model, tokens, labels)
    dbl = tokens[:, POS_LHS] == tokens[:, POS_RHS]
    return {
        "pairs": int(len(ok)),
        "doubled_pairs": int(dbl.sum()),
        "accuracy_all_heldout": float(ok.double().mean()),
        "accuracy_excluding_doubled": float(ok[~dbl].double().mean()) if (~dbl).any() else None,
        "wrong_doubled": int((~ok[dbl]).sum()),
        "wrong_other": int((~ok[~dbl]).sum()),
    }
