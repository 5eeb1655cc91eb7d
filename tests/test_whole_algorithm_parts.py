"""The whole algorithm part by part: minimality, IOI-style completeness, and where the held-out
doubled-pair errors lie (the routing or the addition module)."""

from __future__ import annotations


import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.data import operand_sources
from assignadd.hypotheses import Context, run_all
from assignadd.hypotheses.base import ACTED_MIN
from assignadd.hypotheses.measures import doubled, scrubbing
from assignadd.hypotheses import whole_algorithm as wa
from assignadd.hypotheses.whole_algorithm import ADDER_ERRORS, COMPLETE, MINIMAL
from assignadd.interventions.mutants import MUTANTS, changed_parameters, generator
from assignadd.model import AssignAddTransformer
from assignadd.model.components import PAPER
from assignadd.tests.attention_breaks import slot_positions_suppressed

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)
REQUIRED_PARTS = [p for p in scrubbing.PARTS if p != "non_value_tokens"]


# ----- the donor draws ---------------------------------------------------------------------------------
def test_pick_draws_another_candidate_with_the_same_key_and_a_differing_carry():
    key = torch.tensor([0, 0, 0, 1, 1, 2])
    carry = torch.tensor([[5], [5], [6], [7], [8], [9]])
    idx, found = scrubbing._pick(key, torch.arange(6), key, generator(0, "t"))
    assert torch.equal(key[idx[found]], key[found]) and (idx[found] != torch.arange(6)[found]).all()
    assert found.tolist() == [True] * 5 + [False]  # key 2 has no other member: keeps itself
    idx, found = scrubbing._pick(
        key, torch.arange(6), key, generator(0, "t"), target_carry=carry, candidate_carry=carry
    )
    assert found.tolist() == [True, True, True, True, True, False]
    assert (carry[idx[found]] != carry[found]).all() and torch.equal(key[idx[found]], key[found])
    # a column where the target carries nothing (-1) does not need to differ
    idx, found = scrubbing._pick(
        torch.zeros(2, dtype=torch.long),
        torch.tensor([0, 1]),
        torch.zeros(2, dtype=torch.long),
        generator(0, "t"),
        target_carry=torch.tensor([[-1, 3], [4, 3]]),
        candidate_carry=torch.tensor([[-1, 3], [4, 3]]),
    )
    assert found.tolist() == [False, False]  # both differ from each other only where a target carries nothing


def test_plans_resample_by_what_each_part_carries():
    task = Task()
    tokens, labels = task.pool("2var_heldout_pair", 300)
    model = AssignAddTransformer(seed=3)
    plans = scrubbing.scrub_plans(model, tokens, labels, seed=0)
    B, T = tokens.shape
    flat_tok = tokens.reshape(-1)
    prev = torch.cat([torch.full((B, 1), -1), tokens[:, :-1]], 1).reshape(-1)
    pos = torch.arange(T).repeat(B)
    removed, targets = plans["removed"], plans["targets"]
    # value tokens: the hypothesis keeps (position, variable before); removal changes the variable
    vt = targets["value_token_identity"]
    hyp = plans["hypothesis"][PAPER.ATTN_OUT_1][vt]
    assert torch.equal(pos[hyp], pos[vt]) and torch.equal(prev[hyp], prev[vt])
    rem = removed["value_token_identity"][PAPER.ATTN_OUT_1][vt]
    assert torch.equal(pos[rem], pos[vt]) and (prev[rem] != prev[vt]).all()
    # operand values read by Layer 2: the hypothesis keeps the number, removal changes it
    for part in ("lhs_value_read", "rhs_value_read"):
        cells = targets[part]
        hyp = plans["hypothesis"][PAPER.VALUES_2][cells]
        rem = removed[part][PAPER.VALUES_2][cells]
        assert torch.equal(flat_tok[hyp], flat_tok[cells]) and torch.equal(pos[hyp], pos[cells])
        assert (flat_tok[rem] != flat_tok[cells]).all() and torch.equal(pos[rem], pos[cells])
    # the MLP's output: the redraw keeps the sum, removal changes it
    cells = targets["mlp_adds"]
    rows = lambda c: c // T  # noqa: E731
    assert torch.equal(labels[rows(plans["redrawn"][PAPER.MLP_OUT_2][cells])], labels)
    assert (labels[rows(removed["mlp_adds"][PAPER.MLP_OUT_2][cells])] != labels).all()
    assert all(share > 0.99 for p, share in plans["removed_share"].items() if p != "non_value_tokens")


def test_doubled_sets_pair_every_heldout_doubled_pair_with_other_heldout_pairs_and_constant_twins():
    task = Task()
    sets = doubled.doubled_sets(task, seed=0)
    d = sets["doubled"]
    pairs = sets["pairs"]
    assert (pairs[d, 0] == pairs[d, 1]).all() and (pairs[~d, 0] != pairs[~d, 1]).all()
    assert {(a, a) for a in pairs[d, 0].tolist()} == {p for p in task.heldout_pairs if p[0] == p[1]}
    assert all(tuple(p) in task.heldout_pairs for p in pairs.tolist())
    assert int(d.sum()) == int((~d).sum())
    # every sequence reaches its operands through a variable; its twin holds them as constants
    src = torch.stack([sets["tokens"][torch.arange(len(d)), s] for s in operand_sources(sets["tokens"]).T], 1)
    assert torch.equal(src, pairs)
    assert (sets["tokens"][:, 13:15] >= task.vocab.first_var).any(dim=1).all()
    assert torch.equal(sets["twins"][:, 13:15], pairs) and torch.equal(sets["twins"][:, :13], sets["tokens"][:, :13])
    assert doubled.doubled_sets(Task(f=1.0), seed=0) is None  # nothing held out: no data, never a pass


# ----- on the reference ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference_items():
    r = run_all(Context(load_checkpoint(assignadd.reference_checkpoint()), Task(), n=500), ["whole_algorithm"])[0]
    return r, {e.name: e for e in r.evidence}


@pytest.mark.xdist_group("whole_algorithm_parts_reference")
@needs_reference
def test_every_part_of_the_correspondence_is_needed_on_the_reference(reference_items):
    r, items = reference_items
    assert r.verdict == "pass", r.reason
    for p in REQUIRED_PARTS:
        e = items[f"minimality[{p}]"]
        assert e.required and e.passed and e.threshold is MINIMAL, p
        # removing the part leaves the answer well below the full hypothesis' scrubbed accuracy ...
        assert e.measurement.extra["part_removed_accuracy"] < 0.5 * e.measurement.extra["scrubbed_accuracy"], p
        # ... while a fresh draw that keeps what it carries costs nothing, and that redraw acted
        c = e.controls["redrawn"]
        assert e.control_status("redrawn") == "fail" and c.value < 0.1 and c.acted > ACTED_MIN, p
    # a finding, reported and not required: Layer 1's output at non-value tokens need not carry the token
    e = items["minimality[non_value_tokens]"]
    assert not e.required and e.measurement.value < MINIMAL.value


@pytest.mark.xdist_group("whole_algorithm_parts_reference")
@needs_reference
def test_knocking_parts_out_costs_the_circuit_what_it_costs_the_model(reference_items):
    _, items = reference_items
    e = items["completeness"]
    assert e.required and e.passed and e.threshold is COMPLETE
    subsets = e.measurement.extra["by_subset"]
    assert {"{}", "value_token_identity", "mlp_adds", "lhs_value_read + rhs_value_read"} <= set(subsets)
    assert max(s["gap"] for s in subsets.values()) == pytest.approx(e.measurement.value)
    # every knocked-out part costs a lot in both, so "the same" is not "nothing"
    assert all(s["F(M\\K)"] < 0.5 for k, s in subsets.items() if k != "{}")
    # a circuit without the value tokens' identity is incomplete, and that control acted
    c = e.controls["circuit_without_identity"]
    assert e.control_status("circuit_without_identity") == "fail" and c.value > 0.5 and c.acted > ACTED_MIN


@pytest.mark.xdist_group("whole_algorithm_parts_reference")
@needs_reference
def test_held_out_doubled_pair_errors_are_the_addition_modules_not_the_routings(reference_items):
    r, items = reference_items
    e = items["doubled_pair_errors_are_the_adders"]
    assert not e.required and e.passed and e.threshold is ADDER_ERRORS
    x = e.measurement.extra
    dbl, other = x["doubled_pairs"], x["other_heldout_pairs"]
    # the errors sit on doubled pairs; the routing looks the same on both sets ...
    assert x["errors_that_are_on_doubled_pairs"] > 0.9
    assert dbl["model_accuracy"] < 0.8 < 0.97 < other["model_accuracy"]
    assert abs(dbl["eq_weight_on_operand_values"] - other["eq_weight_on_operand_values"]) < 0.05
    # ... and a perfectly routed input fixes the other pairs' answers but not the doubled pairs'
    assert other["ideal_input_accuracy"] > 0.97 and dbl["ideal_input_accuracy"] < 0.8
    assert dbl["errors_fixed_by_ideal_input"] < 0.2
    # breaking the routing instead makes errors that the same input does fix
    c = e.controls["routing_broken"]
    assert e.control_status("routing_broken") == "fail" and c.acted > ACTED_MIN
    assert c.extra["other_heldout_pairs"]["errors_fixed_by_ideal_input"] > 0.9
    paper = x["paper_heldout_constants"]
    assert paper["accuracy_excluding_doubled"] >= paper["accuracy_all_heldout"]
    assert paper["wrong_doubled"] + paper["wrong_other"] == round((1 - paper["accuracy_all_heldout"]) * paper["pairs"])


# ----- where they must fail ----------------------------------------------------------------------------
def test_a_model_at_chance_shows_no_part_needed_no_completeness_and_no_adder_fault():
    r = run_all(Context(AssignAddTransformer(seed=3), Task(), n=200), ["whole_algorithm"])[0]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    for p in scrubbing.PARTS:
        assert items[f"minimality[{p}]"].measurement.value == 0.0 and not items[f"minimality[{p}]"].passed
    assert not items["completeness"].passed and items["completeness"].measurement.value == 1.0
    assert not items["doubled_pair_errors_are_the_adders"].passed


@needs_reference
def test_with_variable_identity_removed_from_layer_1_its_part_is_not_needed_and_errors_are_the_routings():
    """A mutant with the variables projected out of Layer 1's values: the value tokens carry no identity,
    so removing it costs nothing; the circuit no longer explains the model; its held-out errors are the
    routing's, which a perfectly routed input fixes."""
    model = MUTANTS["ov1_identity_removed"](load_checkpoint(assignadd.reference_checkpoint()), seed=0)
    r = run_all(Context(model, Task(), n=500), ["whole_algorithm"])[0]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    assert items["minimality[value_token_identity]"].status == "fail"
    assert items["minimality[lhs_value_read]"].passed  # the parts downstream are still needed
    assert items["completeness"].status == "fail"
    assert items["doubled_pair_errors_are_the_adders"].status == "fail"


@needs_reference
def test_with_the_mlp_broken_its_part_cannot_be_shown_needed():
    model = MUTANTS["mlp_neurons_permuted"](load_checkpoint(assignadd.reference_checkpoint()), seed=0)
    r = run_all(Context(model, Task(), n=200), ["whole_algorithm"])[0]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    assert not items["minimality[mlp_adds]"].passed
    assert not items["doubled_pair_errors_are_the_adders"].passed


def test_correspondence_version_2_adds_the_variable_at_t_minus_1_outside_value_tokens():
    """Version 2 (registered 2026-12-01) differs from the paper's only at non-value positions whose
    predecessor is a variable: there it also keys by that variable; value tokens keep the paper's features."""
    from assignadd import parse
    from assignadd.data.tokens import POS_RHS
    from assignadd.hypotheses.measures.scrubbing import routing_keys
    from assignadd.model import ModelConfig

    cfg = ModelConfig()
    t = torch.stack([parse("a=3 b=4 + a 5 ="), parse("b=3 a=4 + b 5 ="), parse("a=9 b=4 + a 5 =")])
    paper, v2 = routing_keys(t, cfg, "paper"), routing_keys(t, cfg, "hypothesis")
    # the constant 5 in the RHS slot after variable a (rows 0 and 2) or b (row 1)
    assert paper[0, POS_RHS] == paper[1, POS_RHS]  # the paper: the token and its position only
    assert v2[0, POS_RHS] != v2[1, POS_RHS] and v2[0, POS_RHS] == v2[2, POS_RHS]
    # a value token (position 9: 3 after a; 9 after a in row 2): the variable before it, not the number
    assert v2[0, 9] == v2[2, 9] == paper[0, 9] == paper[2, 9] and v2[0, 9] != v2[1, 9]
    # the wrong correspondence drops the variable at value tokens
    wrong = routing_keys(t, cfg, "position_only")
    assert wrong[0, 9] == wrong[1, 9]


# ----- each pool by itself (re-registration 2026-12-04) -------------------------------------------------
POOLS = wa.POOLS


def test_a_pool_that_loses_under_the_scrub_fails_although_the_pooled_figure_recovers():
    """Two pools of 100: the scrub costs pool A 20 points and gives pool B 20; pooled, nothing is lost."""
    ones, zeros = torch.ones(100, dtype=torch.bool), torch.zeros(100, dtype=torch.bool)
    partly = torch.arange(100) < 80
    model_ok = torch.cat([ones, partly])  # A: 1.00, B: 0.80
    scrubbed_ok = torch.cat([partly, ones])  # A: 0.80, B: 1.00
    pooled = wa.recovered(model_ok, scrubbed_ok, torch.cat([zeros, zeros]), seed=0, acted=None, label="t")
    assert pooled.value == pytest.approx(1.0) and wa.RECOVERS.status(pooled.low, pooled.high) != "fail"
    a = wa.kept(model_ok[:100], scrubbed_ok[:100], chance=1 / 59, seed=0, label="a", acted=None)
    b = wa.kept(model_ok[100:], scrubbed_ok[100:], chance=1 / 59, seed=0, label="b", acted=None)
    assert a.value == pytest.approx((0.8 - 1 / 59) / (1 - 1 / 59))
    assert wa.KEEPS.status(a.low, a.high) == "fail" and a.extra["loss_under_the_scrub"] == pytest.approx(0.2)
    assert b.value > 1 and wa.KEEPS.status(b.low, b.high) == "pass"  # the gain is shown, and stays B's
    # a pool the model does not solve has nothing to explain: 0, never a ratio of noise
    at_chance = wa.kept(zeros, ones, chance=1 / 59, seed=0, label="c", acted=None)
    assert at_chance.value == 0.0 and "nothing to explain" in at_chance.extra["note"]


@pytest.mark.xdist_group("whole_algorithm_parts_reference")
@needs_reference
def test_every_pool_keeps_its_accuracy_under_both_scrubs_on_the_reference(reference_items):
    r, items = reference_items
    for scrub, wrong in (("routing_scrub_keeps", "position_only"), ("addition_scrub_keeps", "first_operand_only")):
        for p in POOLS:
            e = items[f"{scrub}[{p}]"]
            x = e.measurement.extra
            assert e.required and e.status == "pass" and e.threshold is wa.KEEPS, (e.name, e.measurement)
            assert e.measurement.n == 100 and abs(x["loss_under_the_scrub"]) <= 0.05, e.name
            assert e.control_status("reinitialised") == "fail" and e.controls["reinitialised"].value == 0.0
            if scrub == "routing_scrub_keeps" and p in wa.CONSTANTS_ONLY:
                assert wrong not in e.controls  # constants only: the wrong correspondence predicts nothing here
                continue
            c = e.controls[wrong]
            assert e.control_status(wrong) == "fail" and c.value < 0.3 and c.acted > ACTED_MIN, e.name
    # the pooled figures stay, required, as before
    assert items["routing_scrub_recovers"].required and items["addition_scrub_recovers"].required


def _operand_slot_keys_suppressed(strength: float):
    """The reference with the operand slots' positions taken out of Layer 2's key input, in part or whole
    (``tests/attention_breaks.py``): `=` finds the constant operands by position less well."""
    reference = load_checkpoint(assignadd.reference_checkpoint())
    model = slot_positions_suppressed(reference, strength)
    assert changed_parameters(reference, model) == ["blocks.1.attn.W_K"]
    return model


@needs_reference
def test_with_the_operand_slot_keys_removed_a_pool_fails_under_the_addition_scrub():
    """Whole: the model answers 2-var sequences (they do not read the slots' positions) but few 0- and
    1-var ones; the addition scrub's donors of every form take 2-var answers down (0.96 -> 0.36), which
    is a failure of that pool's item."""
    r = run_all(Context(_operand_slot_keys_suppressed(1.0), Task(), n=500), ["whole_algorithm"])[0]
    assert r.verdict == "fail", r.reason
    items = {e.name: e for e in r.evidence}
    failed = [f"addition_scrub_keeps[{p}]" for p in POOLS if items[f"addition_scrub_keeps[{p}]"].status == "fail"]
    assert "addition_scrub_keeps[2var_heldout_pair]" in failed and all(name in r.reason for name in failed)
    e = items["addition_scrub_keeps[2var_heldout_pair]"]
    assert e.measurement.extra["model_accuracy"] > 0.9 and e.measurement.extra["scrubbed_accuracy"] < 0.5


@needs_reference
def test_with_the_operand_slot_keys_suppressed_the_pooled_figure_cancels_and_the_pools_do_not_pass():
    """In part (strength 0.4): pooled, both scrubs still recover (the items that alone decided before
    2026-12-04, and the claim passed on them); per pool, the addition scrub gains on 1-var held-out
    pairs and loses on 2-var ones, and the losses straddle the bar at n = 500: inconclusive, not a pass."""
    r = run_all(Context(_operand_slot_keys_suppressed(0.4), Task(), n=500), ["whole_algorithm"])[0]
    items = {e.name: e for e in r.evidence}
    assert items["model_solves_the_task"].passed
    assert items["routing_scrub_recovers"].passed and items["addition_scrub_recovers"].passed
    gain = items["addition_scrub_keeps[1var_heldout_pair]"].measurement
    loss = items["addition_scrub_keeps[2var_heldout_pair]"].measurement
    assert gain.extra["loss_under_the_scrub"] < 0 < loss.extra["loss_under_the_scrub"]
    assert r.verdict == "inconclusive", r.reason
    assert items["addition_scrub_keeps[2var_heldout_pair]"].status == "inconclusive"
    assert "addition_scrub_keeps[2var_heldout_pair]" in r.reason


@needs_reference
def test_a_model_that_fails_one_pool_fails_the_claim_where_the_pooled_accuracy_only_straddles():
    """The precondition per pool (re-registered 2026-12-07): with the slot keys half suppressed the model
    answers 1-var held-out pairs 0.73 of the time and the five pools together 0.904, whose interval straddles
    the bar; the pool's own item fails, and so does the claim."""
    r = run_all(Context(_operand_slot_keys_suppressed(0.5), Task(), n=500), ["whole_algorithm"])[0]
    items = {e.name: e for e in r.evidence}
    pooled, pool = items["model_solves_the_task"], items["model_solves_the_task[1var_heldout_pair]"]
    assert pooled.status == "inconclusive" and not pooled.required
    assert pool.status == "fail" and pool.required and pool.measurement.value < 0.8
    assert items["model_solves_the_task[2var_restricted_1]"].status == "pass"
    assert r.verdict == "fail" and "model_solves_the_task[1var_heldout_pair]" in r.reason
