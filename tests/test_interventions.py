"""The intervention engine: sites, kinds, run/knockout, guards, patching, metrics, recipes.

Random-weight models stand in where only the machinery is under test; a planted model with
hand-set weights (Layer 1 copies the previous token, nothing else computes) is used where the
right answer must be known by construction.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from assignadd.data import Task, operand_sources, value_positions
from assignadd.interventions import (
    BACKENDS,
    InterventionError,
    Mean,
    Patch,
    Project,
    Replace,
    Resample,
    Site,
    Zero,
    accuracy,
    activation_patch,
    capture,
    compare,
    firing_hooks,
    interchange,
    knockout,
    logit_diff,
    loss,
    normalized,
    patch_sweep,
    path_patch,
    random_subspace,
    run,
    run_in_pieces,
    summarize_accuracy,
)
from assignadd.model import AssignAddTransformer, ModelConfig

torch.set_num_threads(1)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "interventions.md"


@pytest.fixture(scope="module")
def model():
    return AssignAddTransformer(seed=0).eval()


@pytest.fixture(scope="module")
def pools():
    task = Task()
    clean, clean_labels = task.pool("1var_train", 48, seed=1)
    corrupted, corrupted_labels = task.pool("1var_train", 48, seed=2)
    reference, _ = task.pool("0var_train", 64, seed=3)
    return clean, clean_labels, corrupted, corrupted_labels, reference


# ----- a planted model: Layer 1 copies the previous token; the unembedding reads the copy --------------
N_TOK, N_POS = 74, 16


def planted_previous_token_model() -> AssignAddTransformer:
    """Residual stream = [token one-hot (74) | position one-hot (16) | copied previous token (74)].

    Layer 1: the query of position t and the key of position t-1 share a direction, so each position
    attends (almost entirely) to the one before it; OV copies that token's one-hot into the third
    block. Layer 2 and both MLPs are zero. The logits at position t are the one-hot of token t-1
    (restricted to the 59 numbers): the output at t depends on Layer 1 at t and on nothing else.
    """
    d_model = 2 * N_TOK + N_POS
    cfg = ModelConfig(d_model=d_model, d_head=N_TOK, d_mlp=8)
    model = AssignAddTransformer(cfg, seed=0)
    big = 12.0
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E[:, :N_TOK] = torch.eye(N_TOK)
        model.pos_embed.W_pos[:, N_TOK : N_TOK + N_POS] = torch.eye(N_POS)
        attn = model.blocks[0].attn
        for t in range(N_POS):
            attn.W_Q[0, N_TOK + t, t] = big  # query of position t: direction t
            if t + 1 < N_POS:
                attn.W_K[0, N_TOK + t, t + 1] = big  # key of position t: direction t + 1
        attn.W_V[0, :N_TOK, :] = torch.eye(N_TOK)
        attn.W_O[0, :, N_TOK + N_POS :] = torch.eye(N_TOK)
        model.unembed.W_U[N_TOK + N_POS : N_TOK + N_POS + 59, :] = torch.eye(59)
    return model.eval()


@pytest.fixture(scope="module")
def planted():
    return planted_previous_token_model()


def test_planted_model_predicts_the_previous_token(planted, pools):
    clean = pools[0]
    predicted = planted(clean)[:, 1:].argmax(-1)
    numbers = clean[:, :-1] < 59
    assert torch.equal(predicted[numbers], clean[:, :-1][numbers])


def test_ablating_layer_1_at_a_position_moves_exactly_that_position(planted, pools):
    clean = pools[0]
    base = planted(clean)
    for backend in BACKENDS:
        out = run(planted, clean, [Zero(Site("blocks.0.hook_attn_out", 5))], backend=backend).logits
        moved = (out != base).any(dim=-1).any(dim=0)  # (T,): positions whose logits changed anywhere
        assert moved.tolist() == [t == 5 for t in range(16)]


def test_ablating_layer_1_at_value_positions_moves_exactly_the_value_positions(planted, pools):
    clean = pools[0]
    values = value_positions(clean)
    out = run(planted, clean, [Zero(Site("blocks.0.hook_attn_out", values))]).logits
    moved = (out != planted(clean)).any(dim=-1)  # (B, T)
    assert torch.equal(moved, values)


def test_patching_layer_1_from_a_source_makes_the_planted_model_read_the_source_token(planted, pools):
    clean, _, corrupted, _, _ = pools
    out = run(planted, clean, [Patch(Site("blocks.0.hook_attn_out", 15), corrupted)]).logits
    number = corrupted[:, 14] < 59  # a variable there has no class of its own
    assert number.any() and torch.equal(out[number, 15].argmax(-1), corrupted[number, 14])
    assert torch.equal(out[:, :15], planted(clean)[:, :15])


def test_interchange_scores_the_planted_model_against_the_source_label(planted):
    task = Task()
    base, _ = task.pool("0var_train", 40, seed=5)
    source, _ = task.pool("0var_train", 40, seed=6)
    # Position 15 copies token 14 (the RHS number); patched from the source, it predicts the source's.
    same = interchange(planted, base, source, [Site("blocks.0.hook_attn_out", -1)], source[:, 14])
    assert same.accuracy == 1.0 and same.correct.all() and same.low > 0.9
    # Reading the source at position 14 (which copied token 13, the LHS) predicts the source's LHS.
    moved = interchange(
        planted, base, source, [Site("blocks.0.hook_attn_out", 15)], source[:, 13], source_positions=[14]
    )
    assert moved.accuracy == 1.0


def test_uniform_attention_through_replace_dilutes_the_planted_copy(planted, pools):
    clean = pools[0]

    def uniform(pattern, hook):
        causal = torch.ones_like(pattern).tril()
        return causal / causal.sum(-1, keepdim=True)

    out = run(planted, clean, [Replace(Site("blocks.0.attn.hook_pattern"), uniform)]).logits
    rows, t = torch.arange(len(clean)), 9
    number = clean[:, t - 1] < 59
    copied = planted(clean)[rows, t, clean[:, t - 1].clamp(max=58)][number]
    diluted = out[rows, t, clean[:, t - 1].clamp(max=58)][number]
    assert copied.min() > 0.99  # the planted head puts all its weight on t - 1
    assert diluted.max() < 0.5  # uniform over 10 keys: 1/10 each, unless the token repeats


# ----- run: no-ops, exact patches, the guard --------------------------------------------------------
def test_patching_nothing_changes_nothing(model, pools):
    clean, _, corrupted, _, _ = pools
    for backend in BACKENDS:
        assert torch.equal(run(model, clean, [], backend=backend).logits, model(clean))
        assert torch.equal(activation_patch(model, clean, corrupted, [], backend=backend).logits, model(corrupted))


def test_patching_every_site_from_clean_reproduces_clean_logits(model, pools):
    clean, _, corrupted, _, _ = pools
    sites = firing_hooks(model)
    assert len(sites) == 27  # hook_tokens and every hook of SPEC §2.3 but Layer 1's absent MLP
    for backend in BACKENDS:
        denoised = activation_patch(model, clean, corrupted, sites, "denoise", backend=backend)
        assert torch.equal(denoised.logits, model(clean))
        noised = activation_patch(model, clean, corrupted, sites, "noise", backend=backend)
        assert torch.equal(noised.logits, model(corrupted))
        assert all(n == 1 for n in denoised.hook_calls.values()) and len(denoised.hook_calls) == 27


def test_patching_the_last_residual_from_clean_reproduces_clean_logits(model, pools):
    clean, _, corrupted, _, _ = pools
    out = activation_patch(model, clean, corrupted, ["blocks.1.hook_resid_post"]).logits
    assert torch.equal(out, model(clean))


@pytest.mark.parametrize(
    "hook",
    [
        "blocks.0.attn.hook_pattern",
        "blocks.0.hook_attn_out",
        "blocks.1.attn.hook_k",
        "blocks.1.hook_resid_mid",
        "blocks.1.mlp.hook_post",
    ],
)
def test_last_only_runs_give_the_full_runs_last_logits_and_fire_the_same_hooks(model, pools, hook):
    """``run(..., last_only=True)`` is an optimisation only: same answers (to float rounding), same hook calls,
    for a patch
    (whose source is read by an early-stopped clean forward) and for an ablation, wherever they sit."""
    clean, _, corrupted, _, _ = pools
    for iv in (Patch(Site(hook, positions=3), corrupted), Zero(Site(hook, positions=15))):
        full = run(model, clean, [iv])
        last = run(model, clean, [iv], last_only=True)
        assert last.logits.shape == (len(clean), 1, 59)
        assert last.hook_calls == full.hook_calls == {hook: 1}
        torch.testing.assert_close(last.last_logits, full.last_logits, atol=1e-5, rtol=1e-5)
        nnsight_last = run(model, clean, [iv], last_only=True, backend="nnsight").last_logits
        assert torch.equal(nnsight_last, full.last_logits)  # nnsight runs the full forward and reads its last position
    moved = run(model, clean, [Replace(Site(hook), lambda a, hook: 30 * a.roll(1, dims=0))], last_only=True).last_logits
    assert (moved - model(clean)[:, -1]).abs().max() > 1e-3  # the ablation acted on the last-only path


def test_capture_stops_early_and_still_read_every_hook(model, pools):
    clean = pools[0]
    _, cache = model.run_with_cache(clean)
    hooks = ["blocks.0.hook_attn_out", "blocks.1.attn.hook_k", "blocks.1.mlp.hook_pre"]
    for n in range(1, len(hooks) + 1):
        got = capture(model, clean, hooks[:n])
        assert set(got) == set(hooks[:n])
        for h in hooks[:n]:
            torch.testing.assert_close(got[h], cache[h], atol=1e-5, rtol=1e-5)


def test_capture_stops_after_the_last_hook_and_reads_what_the_full_forward_reads(model, pools):
    clean = pools[0]
    _, cache = model.run_with_cache(clean)
    fired = []
    handle = model.hook_dict["blocks.1.mlp.hook_pre"].register_forward_hook(lambda m, i, o: fired.append(1))
    try:
        got = capture(model, clean, ["blocks.1.hook_resid_mid", "blocks.0.attn.hook_pattern"])
        at = capture(model, clean, ["blocks.1.hook_resid_mid"], pos=15)
    finally:
        handle.remove()
    assert fired == []  # the MLP after the last captured hook never ran
    for h in got:
        torch.testing.assert_close(got[h], cache[h])
    torch.testing.assert_close(at["blocks.1.hook_resid_mid"], cache["blocks.1.hook_resid_mid"][:, 15])
    with pytest.raises(InterventionError, match="no hook named"):
        capture(model, clean, ["blocks.0.mlp.hook_pre"])  # Layer 1 has no MLP: its hooks are not offered
    with pytest.raises(InterventionError, match="no hook named"):
        capture(model, clean, ["blocks.9.hook_resid_mid"])


def test_clean_forwards_in_pieces_give_the_same_bits_as_one_forward(pools, monkeypatch):
    from assignadd.interventions import engine

    clean = pools[0]
    model = AssignAddTransformer(seed=4).eval()
    hooks = ["blocks.0.attn.hook_pattern", "blocks.1.hook_resid_mid"]
    whole_capture = capture(model, clean, hooks)
    at_hooks = ["blocks.0.hook_attn_out", "blocks.1.hook_resid_mid"]
    whole_at = capture(model, clean, at_hooks, pos=15)
    whole_runs = [
        run(model, clean, [], read=["blocks.0.hook_attn_out"], last_only=True),
        run(model, clean, [], read=["blocks.1.mlp.hook_post"]),
        run(model, clean, [], stop_at_layer=1),
    ]
    monkeypatch.setattr(engine, "CLEAN_CHUNK", 7)  # 48 sequences: six pieces of 7 and one of 6
    pieces = []
    monkeypatch.setattr(engine, "_run_once", _recording(engine._run_once, pieces))
    for h, a in capture(model, clean, hooks).items():
        assert torch.equal(a, whole_capture[h])
    for h, a in capture(model, clean, at_hooks, pos=15).items():
        assert torch.equal(a, whole_at[h])
    runs = [
        run(model, clean, [], read=["blocks.0.hook_attn_out"], last_only=True),
        run(model, clean, [], read=["blocks.1.mlp.hook_post"]),
        run(model, clean, [], stop_at_layer=1),
    ]
    assert pieces[:7] == [7, 7, 7, 7, 7, 7, 6]
    for got, want in zip(runs, whole_runs):
        assert torch.equal(got.logits, want.logits)
        assert got.activations.keys() == want.activations.keys()
        for h in want.activations:
            assert torch.equal(got.activations[h], want.activations[h])
    # intervened runs, and clean runs of a model with hooks (a knock-out whose positions fit one batch
    # size), stay whole
    pieces.clear()
    run(model, clean, [Zero(Site("blocks.0.hook_attn_out"))])
    ablated = knockout(model, [Zero(Site("blocks.0.hook_attn_out", positions=torch.zeros(48, dtype=torch.long)))])
    run(ablated, clean, [])
    assert pieces == [48, 48]


def test_run_in_pieces_gives_one_runs_bits_for_per_sequence_edits(model, pools, monkeypatch):
    from assignadd.interventions import engine

    clean, corrupted = pools[0], pools[2]
    hook = "blocks.0.hook_attn_out"
    at = value_positions(clean)

    def edits(rows):
        return [Patch(Site(hook, positions=at[rows]), corrupted[rows]), Zero(Site("blocks.1.hook_mlp_out", 15))]

    whole = run(model, clean, edits(slice(None)), read=["blocks.1.hook_resid_mid"], last_only=True)
    monkeypatch.setattr(engine, "CLEAN_CHUNK", 10)  # 48 sequences: five pieces
    pieces = run_in_pieces(model, clean, edits, read=["blocks.1.hook_resid_mid"], last_only=True)
    assert torch.equal(pieces.logits, whole.logits)
    assert torch.equal(pieces.activations["blocks.1.hook_resid_mid"], whole.activations["blocks.1.hook_resid_mid"])
    assert pieces.hook_calls == {hook: 5, "blocks.1.hook_mlp_out": 5}
    assert pieces.changed == pytest.approx(whole.changed, abs=0)
    assert not torch.equal(pieces.logits, run(model, clean, []).logits[:, -1:])  # the edits acted


def _recording(run_once, sizes):
    def recorded(model, tokens, *args):
        sizes.append(len(tokens))
        return run_once(model, tokens, *args)

    return recorded


def test_an_ablation_that_must_matter_changes_the_output(model, pools):
    clean = pools[0]
    out = run(model, clean, [Zero("blocks.1.hook_resid_post")]).logits
    assert torch.equal(out, torch.zeros_like(out))  # no bias: zero residual, zero logits
    assert not torch.equal(run(model, clean, [Zero(Site("hook_embed", 12))]).logits, model(clean))


def test_a_hook_the_forward_bypasses_raises(model, pools):
    # stopped after Layer 1, the forward never reaches Layer 2: an edit there must not pass silently
    with pytest.raises(InterventionError, match="fired 0 time"):
        run(model, pools[0], [Zero(Site("blocks.1.hook_resid_mid", -1))], stop_at_layer=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer1_mlp_hooks_are_not_offered(model, pools, backend):
    assert "blocks.0.mlp.hook_pre" not in model.hook_dict and "blocks.0.mlp.hook_post" not in model.hook_dict
    with pytest.raises(InterventionError, match="no hook named"):
        run(model, pools[0], [Zero(Site("blocks.0.mlp.hook_pre", -1))], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wrong_hook_name_raises_with_a_suggestion(model, pools, backend):
    with pytest.raises(InterventionError, match="did you mean blocks.0.hook_attn_out"):
        run(model, pools[0], [Zero("blocks.0.hook_atn_out")], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_site_selecting_no_cell_raises(model, pools, backend):
    clean = pools[0]
    with pytest.raises(InterventionError, match="selects no cell"):
        run(model, clean, [Zero(Site("blocks.0.hook_attn_out", torch.zeros(16, dtype=torch.bool)))], backend=backend)
    with pytest.raises(InterventionError, match="selects no cell"):  # keys after the query: causally masked
        run(model, clean, [Zero(Site("blocks.0.attn.hook_pattern", 3, keys=[5, 6]))], backend=backend)


def test_a_missing_operand_position_raises_instead_of_patching_the_last_position(model, pools):
    clean = pools[0]
    missing = operand_sources(clean)[:, 0].clone()
    missing[0] = -1
    with pytest.raises(InterventionError, match="-1"):
        run(model, clean, [Zero(Site("blocks.0.hook_attn_out", missing))])


def test_a_missing_source_position_raises_instead_of_reading_the_last_position(model, pools):
    clean, _, corrupted, _, _ = pools
    source_at = operand_sources(corrupted)[:, 0].clone()
    source_at[3] = -1
    with pytest.raises(InterventionError, match="source_positions"):
        run(model, clean, [Patch(Site("blocks.0.hook_attn_out", operand_sources(clean)[:, 0]), corrupted, source_at)])


def test_a_patch_from_a_batch_of_another_size_raises(model, pools):
    clean, _, corrupted, _, _ = pools
    with pytest.raises(InterventionError, match="same batch size"):
        run(model, clean, [Patch("blocks.0.hook_attn_out", corrupted[:10])])


def test_keys_on_a_hook_without_a_key_axis_raises():
    with pytest.raises(InterventionError, match="keys="):
        Site("blocks.0.hook_attn_out", 3, keys=2)


def test_a_per_sequence_position_patches_one_cell_per_sequence(model, pools):
    clean, _, corrupted, _, _ = pools
    where = operand_sources(clean)[:, 1]
    seen = {}

    def record(act, hook):
        seen["act"] = act.clone()
        return act

    run(
        model,
        clean,
        [Patch(Site("blocks.0.hook_resid_post", where), corrupted), Replace("blocks.0.hook_resid_post", record)],
    )
    base = capture(model, clean, ["blocks.0.hook_resid_post"])["blocks.0.hook_resid_post"]
    source = capture(model, corrupted, ["blocks.0.hook_resid_post"])["blocks.0.hook_resid_post"]
    rows = torch.arange(len(clean))
    expected = base.clone()
    expected[rows, where] = source[rows, where]
    assert torch.equal(seen["act"], expected)


# ----- every kind, both backends --------------------------------------------------------------------
def every_kind(clean, corrupted, reference):
    values = value_positions(clean)
    return {
        "zero": [Zero(Site("blocks.0.hook_attn_out", values))],
        "zero_pattern_cells": [Zero(Site("blocks.1.attn.hook_pattern", -1, keys=operand_sources(clean)))],
        "mean_per_position": [Mean(Site("blocks.0.hook_attn_out", values), reference)],
        "mean_all_positions": [Mean(Site("blocks.1.hook_resid_mid", -1), reference, per_position=False)],
        "resample": [Resample(Site("blocks.1.attn.hook_pattern", -1), reference, seed=1)],
        "resample_matched": [
            Resample(
                Site("blocks.1.hook_resid_mid", -1), reference, seed=2, match=(clean[:, 13] % 4, reference[:, 13] % 4)
            )
        ],
        "replace": [Replace(Site("blocks.1.attn.hook_attn_scores", -1), lambda s, hook: s * 0.5)],
        "patch": [Patch(Site("blocks.1.attn.hook_v", operand_sources(clean)), corrupted)],
        "project_keep": [Project(Site("blocks.1.mlp.hook_pre", -1), random_subspace(512, 20, seed=0), "keep")],
        "project_remove": [Project(Site("blocks.1.hook_resid_mid", -1), random_subspace(128, 8, seed=1), "remove")],
    }


@pytest.mark.parametrize("kind", list(every_kind(*[torch.zeros(2, 16, dtype=torch.long)] * 3)))
def test_both_backends_give_the_same_logits_for_every_kind(model, pools, kind):
    clean, _, corrupted, _, reference = pools
    interventions = every_kind(clean, corrupted, reference)[kind]
    tl = run(model, clean, interventions, backend="tl")
    nn = run(model, clean, interventions, backend="nnsight")
    assert torch.equal(tl.logits, nn.logits)
    assert tl.hook_calls == nn.hook_calls == {interventions[0].site.hook: 1}
    assert not torch.equal(tl.logits, model(clean)), f"{kind} changed nothing: the test would prove nothing"


def test_mean_ablation_writes_the_reference_mean(model, pools):
    clean, reference = pools[0], pools[4]
    hook = "blocks.0.hook_resid_post"
    seen = {}

    def record(act, h):
        seen["act"] = act.clone()
        return act

    ref = capture(model, reference, [hook])[hook]
    run(model, clean, [Mean(hook, reference), Replace(hook, record)])
    assert torch.allclose(seen["act"], ref.mean(0, keepdim=True).expand_as(seen["act"]))
    run(model, clean, [Mean(hook, reference, per_position=False), Replace(hook, record)])
    assert torch.allclose(seen["act"], ref.mean((0, 1)).expand_as(seen["act"]))


def test_matched_resampling_draws_only_sequences_with_the_same_feature(pools):
    clean, reference = pools[0], pools[4]
    base_f, ref_f = clean[:, 13] % 3, reference[:, 13] % 3
    r = Resample("blocks.0.hook_attn_out", reference, seed=0, match=(base_f, ref_f))
    assert torch.equal(ref_f[r.draw(len(clean))], base_f)
    with pytest.raises(InterventionError, match="no reference sequence"):
        Resample("blocks.0.hook_attn_out", reference, match=(torch.full((4,), 7), ref_f))


def test_resampling_is_seeded(model, pools):
    clean, reference = pools[0], pools[4]
    a = run(model, clean, [Resample("blocks.0.hook_attn_out", reference, seed=4)]).logits
    b = run(model, clean, [Resample("blocks.0.hook_attn_out", reference, seed=4)]).logits
    c = run(model, clean, [Resample("blocks.0.hook_attn_out", reference, seed=5)]).logits
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_keeping_and_removing_a_subspace_add_up_to_the_activation(model, pools):
    clean = pools[0]
    hook, basis = "blocks.1.hook_resid_mid", torch.randn(5, 128)
    seen = {}

    def record(name):
        def fn(act, h):
            seen[name] = act.clone()
            return act

        return fn

    run(model, clean, [Replace(hook, record("orig"))])
    run(model, clean, [Project(hook, basis, "keep"), Replace(hook, record("keep"))])
    run(model, clean, [Project(hook, basis, "remove"), Replace(hook, record("remove"))])
    assert torch.allclose(seen["keep"] + seen["remove"], seen["orig"], atol=1e-5)
    q = torch.linalg.qr(basis.T.double()).Q.float()  # (128, 5)
    assert torch.allclose(seen["remove"] @ q, torch.zeros(len(clean), 16, 5), atol=1e-4)
    full = run(model, clean, [Project(hook, torch.eye(128), "keep")]).logits
    assert torch.allclose(full, model(clean), atol=1e-5)


def test_random_subspace_is_orthonormal_seeded_and_avoids_the_excluded_rows():
    exclude = random_subspace(64, 6, seed=0)
    sub = random_subspace(64, 6, seed=1, exclude=exclude)
    assert torch.allclose(sub @ sub.T, torch.eye(6, dtype=sub.dtype), atol=1e-10)
    assert (sub @ exclude.T).abs().max() < 1e-10
    assert torch.equal(sub, random_subspace(64, 6, seed=1, exclude=exclude))
    with pytest.raises(InterventionError, match="linearly dependent"):
        Project("blocks.1.hook_resid_mid", torch.ones(2, 128))


# ----- knockout -------------------------------------------------------------------------------------
def test_knockout_copies_leave_the_original_model_unchanged(model, pools):
    clean, reference = pools[0], pools[4]
    before = model(clean)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    interventions = [
        Mean(Site("blocks.0.hook_attn_out", value_positions(reference)[0]), reference),
        Zero(Site("blocks.1.attn.hook_pattern", -1, keys=[13, 14])),
    ]
    ablated = knockout(model, interventions)
    assert torch.equal(model(clean), before)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert not any(hp.fwd_hooks for hp in model.hook_dict.values())
    assert torch.equal(ablated(clean), run(model, clean, interventions).logits)
    assert torch.equal(ablated(clean), ablated(clean))  # the hooks stay on: ordinary calls see them
    assert ablated.knockout_interventions == interventions


def test_a_knockout_with_token_aware_positions_ablates_each_batch_at_its_own_positions(planted, pools):
    clean, _, corrupted, _, _ = pools
    control = knockout(planted, [Zero(Site("blocks.0.hook_attn_out", value_positions))])
    for batch in (clean, corrupted[:7]):
        expected = run(planted, batch, [Zero(Site("blocks.0.hook_attn_out", value_positions(batch)))]).logits
        assert torch.equal(control(batch), expected)
        assert torch.equal(control(batch, last_only=True)[:, -1], expected[:, -1])
    only_pads = torch.full((2, 16), 61)
    assert torch.equal(control(only_pads), planted(only_pads))  # nothing selected: passes through


def test_knockout_refuses_patches_and_bypassed_hooks(model, pools):
    clean = pools[0]
    with pytest.raises(InterventionError, match="cannot be permanent"):
        knockout(model, [Patch("blocks.0.hook_attn_out", clean)])
    with pytest.raises(InterventionError, match="no hook named"):
        knockout(model, [Zero("blocks.0.mlp.hook_post")])


# ----- sweeps, path patching ------------------------------------------------------------------------
def test_patch_sweep_matches_single_patches_and_a_full_patch_restores_clean(model, pools):
    clean, clean_labels, corrupted, corrupted_labels, _ = pools
    hooks = ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre"]

    def metric(logits):
        return logit_diff(logits, clean_labels, corrupted_labels)

    sweep = patch_sweep(model, clean, corrupted, hooks, [13, 15, None], metric)
    assert sweep.shape == (2, 3, len(clean))
    single = metric(activation_patch(model, clean, corrupted, [Site(hooks[1], 13)]).logits)
    assert torch.allclose(sweep[1, 0], single)
    assert torch.allclose(sweep[0, 2], metric(model(clean)))  # every position of resid_pre 0: the clean run
    nn = patch_sweep(model, clean, corrupted, hooks[:1], [15], metric, backend="nnsight")
    assert torch.equal(nn[0, 0], sweep[0, 1])


def test_path_patching_into_keys_only_changes_the_keys(model, pools):
    clean, _, corrupted, _, _ = pools
    sender = Site("blocks.0.hook_attn_out", value_positions(clean))
    out = path_patch(model, clean, corrupted, sender, ["blocks.1.attn.hook_k"]).logits
    # By hand: Layer-2 keys from the residual with Layer 1's output patched, everything else as in clean.
    acts = capture(model, clean, ["blocks.1.hook_resid_pre", "blocks.0.hook_attn_out"])
    source = capture(model, corrupted, ["blocks.0.hook_attn_out"])["blocks.0.hook_attn_out"]
    mask = value_positions(clean)[..., None]
    resid = (
        acts["blocks.1.hook_resid_pre"]
        - acts["blocks.0.hook_attn_out"]
        + torch.where(mask, source, acts["blocks.0.hook_attn_out"])
    )
    attn = model.blocks[1].attn
    keys = torch.einsum("btd,hde->bthe", resid, attn.W_K) + attn.b_K
    expected = run(model, clean, [Replace("blocks.1.attn.hook_k", lambda k, hook: keys)]).logits
    assert torch.allclose(out, expected, atol=1e-5)
    assert not torch.allclose(out, model(clean))


def test_path_patching_through_every_route_equals_the_plain_patch(model, pools):
    clean, _, corrupted, _, _ = pools
    sender = Site("blocks.0.hook_attn_out", 14)
    through_resid = path_patch(model, clean, corrupted, sender, ["blocks.1.hook_resid_pre"], backend="nnsight").logits
    plain = activation_patch(model, clean, corrupted, [sender], "noise").logits  # base = clean, source = corrupted
    assert torch.allclose(through_resid, plain, atol=1e-6)


def test_path_patching_refuses_a_receiver_before_the_sender(model, pools):
    clean, _, corrupted, _, _ = pools
    with pytest.raises(InterventionError, match="runs before the sender"):
        path_patch(model, clean, corrupted, Site("blocks.1.hook_attn_out"), ["blocks.0.attn.hook_k"])


# ----- metrics ----------------------------------------------------------------------------------------
def test_metrics_are_per_example_and_defined_as_documented():
    logits = torch.tensor([[[0.0, 2.0, 1.0]], [[3.0, 0.0, 1.0]]])  # (B=2, T=1, V=3)
    labels = torch.tensor([1, 2])
    assert accuracy(logits, labels).tolist() == [True, False]
    assert torch.allclose(loss(logits, labels), -torch.log_softmax(logits[:, -1], -1)[[0, 1], [1, 2]])
    assert logit_diff(logits, labels, torch.tensor([2, 0])).tolist() == [1.0, -2.0]
    s = summarize_accuracy(torch.tensor([True] * 9 + [False]))
    assert s["rate"] == 0.9 and s["low"] < 0.9 < s["high"] and s["n"] == 10
    c = compare(torch.zeros(100), torch.linspace(-1, 3, 100), seed=0)
    assert c["fraction_worse"] == 0.25 and c["low"] < c["change"] < c["high"]
    assert normalized(torch.ones(3), torch.ones(3), torch.ones(3))["value"] is None  # reported, not divided by
    assert normalized(torch.tensor([0.5]), torch.tensor([0.0]), torch.tensor([1.0]))["value"] == 0.5


# ----- the recipes in docs/interventions.md run as written ----------------------------------------
def test_every_recipe_in_the_docs_runs_as_written():
    text = DOCS.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{DOCS.name} block {i + 1}", "exec"), namespace)
        except Exception as e:  # name the recipe that broke
            raise AssertionError(f"{DOCS.name}, python block {i + 1} fails: {e!r}\n{block}") from e
