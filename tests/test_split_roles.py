"""A role filled by two heads, as known truth: ``planted.planted_split_fetch``, in which Layer 2's two heads
each fetch one operand (and Layer 1's two heads each bring `=` one operand's identity).

The model is checked to be what it claims: it answers every pool, each Layer-2 head puts all of `=`'s
attention on one operand's source, and without either head the answers fall. The search
(``hypotheses.locate``) makes each role the set of heads that fills it: the fetching role both Layer-2
heads, the previous-token role's `=` row both Layer-1 heads; every mechanistic claim true by
construction then passes naming both, breaking either head of the pair fails ``identity_qk`` and shows
which, and a head that writes nothing is never chosen.
"""

from __future__ import annotations

import re

import pytest
import torch

from assignadd.data import Task, operand_sources
from assignadd.hypotheses import Context, run_all

from assignadd.tests.planted import planted_split_fetch

POOLS = ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair", "1var_restricted_slot", "2var_restricted_2")


@pytest.fixture(scope="module")
def split():
    return planted_split_fetch()


def _answers_and_fetch(model, tokens, labels):
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter="blocks.1.attn.hook_pattern")
    pattern = cache["blocks.1.attn.hook_pattern"][:, :, -1]  # (B, heads, keys): `=`'s rows
    src, rows = operand_sources(tokens), torch.arange(len(tokens))
    weights = torch.stack([pattern[rows, :, src[:, side]] for side in (0, 1)], -1)  # (B, heads, side)
    return float((logits[:, -1].argmax(-1) == labels).double().mean()), weights


def test_the_split_model_answers_every_pool_with_each_head_fetching_one_operand(split):
    task = Task()
    for pool in POOLS:
        tokens, labels = task.pool(pool, 300, seed=1)
        accuracy, weights = _answers_and_fetch(split, tokens, labels)
        assert accuracy == 1.0, pool
        distinct = operand_sources(tokens)[:, 0] != operand_sources(tokens)[:, 1]
        w = weights[distinct]
        assert float(w[:, 0, 0].min()) > 0.99 and float(w[:, 1, 1].min()) > 0.99, pool  # 1.0: left, 1.1: right
        assert float(w[:, 0, 1].max()) < 0.01 and float(w[:, 1, 0].max()) < 0.01, pool  # and nothing of the other


@pytest.mark.parametrize("head", [0, 1])
def test_without_either_fetching_head_the_answers_fall(split, head):
    tokens, labels = Task().pool("1var_heldout_pair", 300, seed=1)
    cut = planted_split_fetch()
    with torch.no_grad():
        cut.blocks[1].attn.W_O[head].zero_()
    accuracy, _ = _answers_and_fetch(cut, tokens, labels)
    assert accuracy < 0.2  # one operand never arrives
    assert _answers_and_fetch(split, tokens, labels)[0] == 1.0


def test_the_search_makes_each_role_the_set_of_heads_that_fills_it(split):
    located = Context(split, Task(), seed=0, n=200).located
    role = located.roles["fetching_head"]
    assert {role.found, role.runner_up} == {(1, 0), (1, 1)}  # tied, ties to the lowest head ...
    assert role.score == pytest.approx(role.runner_up_score, abs=1e-9)
    assert role.found == (1, 0) and role.also == ((1, 1),)  # ... which alone fetches one operand: 1.1 joins
    assert located.roles["previous_token_head"].also == ((0, 1),)  # `=`'s Layer-1 row: the right slot is 0.1's
    assert located.components.labels() == {
        "previous_token_head": "0.0+0.1",
        "fetching_head": "1.0+1.1",
        "adding_mlp": "1",
    }
    assert located.to_dict()["fetching_head"]["also"] == ["1.1"]


@pytest.mark.slow
def test_every_mechanistic_claim_true_by_construction_passes_naming_both_heads(split):
    """`fourier_neurons` is false by construction (the MLP is the solver's lookup table)."""
    ctx = Context(split, Task(), seed=0, n=200)
    results = {r.claim: r for r in run_all(ctx)}
    for claim in ("previous_token_head", "identity_qk", "shared_residual", "heldout_generalization", "whole_algorithm"):
        assert results[claim].verdict == "pass", (claim, results[claim].reason)
    assert results["fourier_neurons"].verdict == "fail"
    by_head = {e.name: e for e in results["identity_qk"].evidence}["eq_attends_to_operand_values"].measurement.extra
    assert by_head["by_head"]["1.0"][0] > 0.99 and by_head["by_head"]["1.1"][1] > 0.99  # left by 1.0, right by 1.1


@pytest.mark.parametrize("head", [0, 1])
def test_breaking_either_fetching_head_fails_identity_qk_and_shows_which(split, head):
    """Components found on the unbroken model and pinned, as mutation testing does; the broken head's
    queries no longer find anything, so `=` fetches one operand through the role."""
    located = Context(split, Task(), seed=0, n=200).located
    broken = planted_split_fetch()
    with torch.no_grad():
        broken.blocks[1].attn.W_Q[head].zero_()
    ctx = Context(broken, Task(), seed=0, n=200)
    ctx.pin(located)
    [result] = run_all(ctx, ["identity_qk"])
    assert result.verdict == "fail", result.reason
    extra = {e.name: e for e in result.evidence}["eq_attends_to_operand_values"].measurement.extra["by_head"]
    assert max(extra[f"1.{head}"]) < 0.5 and max(extra[f"1.{1 - head}"]) > 0.99  # the broken one fetches nothing


def test_each_fetching_head_brings_its_operand_and_the_roles_ov_reads_both(split):
    """The weight-level items read the role: each head's share of each operand is measured (head 1.0 the
    left one, 1.1 the right one), each operand's OV image mixes the heads by it, and the gain sums them;
    on this model, whose heads copy alike, the adder reads what the one-head solver's reads."""
    from assignadd.hypotheses.measures.circuits import fetch_shares, ov2_mlp2_accuracy
    from assignadd.hypotheses.measures.local import ov2_number_transmission
    from assignadd.tests.planted import planted_solver

    c = Context(split, Task(), seed=0, n=200).components
    shares = fetch_shares(split, Task().pool("2var_train", 200, seed=1)[0], components=c)
    assert torch.allclose(shares, torch.eye(2, dtype=torch.float64), atol=1e-9)
    assert ov2_mlp2_accuracy(split, components=c, shares=shares)[0] == ov2_mlp2_accuracy(planted_solver())[0] == 1.0
    # the gain sums the heads; Layer 2 here reads more directions than the solver's (head 0.1's images)
    assert ov2_number_transmission(split, components=c) > 100 and ov2_number_transmission(planted_solver()) > 100
    with pytest.raises(ValueError, match="several heads"):  # which head brings which operand is measured
        ov2_mlp2_accuracy(split, components=c)


@pytest.mark.parametrize("head", [0, 1])
def test_either_fetching_head_copying_the_wrong_number_fails_shared_residual_alike(split, head):
    """Head 1.0 or 1.1 copying another number (its value weights' number rows permuted): it still attends
    and writes, and shared_residual fails; the weights-only addition item reads the head that brings
    each operand, so it falls whichever head is broken (it read head 1.0 alone before), and its
    ``by_head`` names the broken head."""
    located = Context(split, Task(), seed=0, n=200).located
    broken = planted_split_fetch()
    perm = torch.randperm(59, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        W_V = broken.blocks[1].attn.W_V[head]
        W_V[:59] = W_V[:59][perm]
    ctx = Context(broken, Task(), seed=0, n=200)
    ctx.pin(located)
    [result] = run_all(ctx, ["shared_residual"])
    assert result.verdict == "fail", result.reason
    adder = {e.name: e.measurement for e in result.evidence}["ov2_mlp2_accuracy"]
    assert adder.value < 0.1
    # each head's own images through the adder name the broken one
    assert adder.extra["by_head"][f"1.{head}"] < 0.1 and adder.extra["by_head"][f"1.{1 - head}"] == 1.0


@pytest.mark.parametrize(
    "mutant, own",
    [
        ("layer2_queries_rotated", "identity_qk"),
        ("layer2_values_rotated", "shared_residual"),
        ("layer2_numbers_out_of_values", "shared_residual"),
    ],
)
def test_a_layer2_mutant_breaks_every_head_of_the_role_and_fails_its_claim_only(split, mutant, own):
    """Mutation testing on a role of two heads: the mutant acts on each head of the role (the role is what
    the claim reads), its own claim fails, the claims upstream of it pass."""
    from assignadd.hypotheses.mutation import build_mutant

    located = Context(split, Task(), seed=0, n=200).located
    broken = build_mutant(mutant, split, 0, components=located.components)
    a, b = split.blocks[1].attn, broken.blocks[1].attn
    for head in (0, 1):
        assert any(not torch.equal(getattr(a, w)[head], getattr(b, w)[head]) for w in ("W_Q", "W_V")), head
    ctx = Context(broken, Task(), seed=0, n=200)
    ctx.pin(located)
    upstream = ["previous_token_head", "identity_qk"][: 1 if own == "identity_qk" else 2]
    verdicts = {r.claim: r.verdict for r in run_all(ctx, [*upstream, own])}
    assert verdicts == {**{c: "pass" for c in upstream}, own: "fail"}


WEIGHTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")


def test_layer2_symmetry_mutants_act_on_both_heads_and_keep_the_answers(split):
    """A symmetry mutant of Layer 2 changes each head of the role and keeps the function: the weights
    no input reaches at `=` are those outside what either Layer-1 head can write there (each head writes
    its own convex combination of its images, so the span is of all of them, not of their sum)."""
    from assignadd.hypotheses.mutation import build_mutant
    from assignadd.interventions.mutants import MUTANTS

    c = Context(split, Task(), seed=0, n=200).components
    tokens = Task().pool("2var_train", 300, seed=1)[0]
    names = [
        n for n, m in MUTANTS.items() if m.kind == "symmetry" and m.component in ("layer2_identity_qk", "layer2_ov")
    ]
    assert "layer2_query_unseen_at_eq" in names
    with torch.no_grad():
        before = split(tokens)[:, -1]
        for name in names:
            mutated = build_mutant(name, split, 0, components=c)
            a, b = split.blocks[1].attn, mutated.blocks[1].attn
            for head in (0, 1):
                assert any(not torch.equal(getattr(a, w)[head], getattr(b, w)[head]) for w in WEIGHTS), (
                    name,
                    head,
                )
            assert (mutated(tokens)[:, -1] - before).abs().max() < 1e-3, name


def test_a_head_that_writes_nothing_is_never_chosen():
    """With head 1.1's output zeroed it writes nothing at `=`: the fetching role stays head 1.0 alone, which
    fetches one operand, and identity_qk fails there."""
    silent = planted_split_fetch()
    with torch.no_grad():
        silent.blocks[1].attn.W_O[1].zero_()
    ctx = Context(silent, Task(), seed=0, n=200)
    assert ctx.located.components.fetch_heads == (0,)
    [result] = run_all(ctx, ["identity_qk"])
    assert result.verdict == "fail"


def test_a_split_role_can_be_given_on_the_command_line_and_is_checked():
    from assignadd.hypotheses.locate import check, given
    from assignadd.model.components import Components

    c = Components.parse("prev=0.0+0.1,fetch=1.0+1.1,mlp=1")
    assert (c.prev_eq_heads, c.fetch_heads) == ((0, 1), (0, 1))
    assert given(c).roles["fetching_head"].to_dict()["also"] == ["1.1"]
    assert Components.parse("prev=0.0,fetch=1.0,mlp=1") == Components.paper()
    cfg = planted_split_fetch().cfg
    check(c, cfg)
    for text, says in (
        ("prev=0.0,fetch=1.0+2.1,mlp=1", "the heads of one role must share a layer"),
        ("prev=0.0,fetch=1.0+1.x,mlp=1", "fetch must be L.H or L.H+L.H"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            Components.parse(text)
    for text in ("prev=0.0,fetch=1.0+1.0,mlp=1", "prev=0.0,fetch=1.0+1.2,mlp=1"):
        with pytest.raises(ValueError, match="not a further head"):
            check(Components.parse(text), cfg)


def test_the_figures_draw_the_roles_heads(split, monkeypatch):
    """The report's attention figure of Layer 2 shows the fetching role's mean pattern (`=`'s row: half on
    each operand's source), titled with both heads; Layer 1's shows the role's `=` row; the identity
    matrix is the mean of the heads' matrices, as identity_qk reads it."""
    from assignadd.reports import figures

    drawn = {}
    original = figures._matrix_axes

    def record(data, figsize, vlim, title, **kw):
        drawn[title] = data
        return original(data, figsize, vlim, title, **kw)

    monkeypatch.setattr(figures, "_matrix_axes", record)
    c = Context(split, Task(), seed=0, n=200).components
    with torch.no_grad():
        figures.attention_figures(split, Task(), 0, components=c)
        figures.identity_matrix_figure(split, Task(), components=c)
    tokens = Task().pool("2var_train", 1, seed=0)[0]
    left, right = operand_sources(tokens)[0].tolist()
    eq2 = drawn["Layer 2 [blocks.1 head 0+1, mean] attention"][-1]
    assert eq2[left] == pytest.approx(0.5, abs=1e-3) and eq2[right] == pytest.approx(0.5, abs=1e-3)
    eq1 = drawn["Layer 1 [blocks.0 head 0+1, mean] attention"][-1]
    assert eq1[13] == pytest.approx(0.5, abs=1e-3) and eq1[14] == pytest.approx(0.5, abs=1e-3)
    M = drawn["Layer 2 identity QK  M = (E_var OV₁) QK₂ (E_var OV₁)ᵀ"]
    assert (M.argmax(axis=1) == range(len(M))).all()
