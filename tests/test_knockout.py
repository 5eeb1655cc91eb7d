"""One knock-out mechanism: a knock-out copy acts through every
entry point (``__call__``, ``run_with_hooks``, ``run``, ``capture``, ``last_only``), on any batch; the hook-free
training path refuses it."""

from __future__ import annotations

import pytest
import torch

from assignadd.data import Task, value_positions
from assignadd.tests.knockouts import uniform_value_attention
from assignadd.interventions import InterventionError, Replace, Resample, Site, Zero, capture, knockout, run
from assignadd.model import AssignAddTransformer
from assignadd.training.fast_forward import HookedModelError, last_logits

HOOK = "blocks.0.hook_attn_out"


@pytest.fixture(scope="module")
def setup():
    model = AssignAddTransformer(seed=7)
    task = Task()
    a = task.pool("2var_train", 8, seed=1)[0]
    b = task.pool("1var_train", 5, seed=2)[0]
    return model, a, b


def direct(model, tokens):
    return run(model, tokens, [Zero(Site(HOOK, value_positions))]).logits


def test_knockout_with_callable_positions_acts_through_every_entry_point_on_each_batch(setup):
    model, a, b = setup
    ko = knockout(model, [Zero(Site(HOOK, value_positions))])
    for tokens in (a, b, a):  # alternate batches: a stale batch would edit the wrong cells or crash
        want = direct(model, tokens)
        assert torch.equal(ko(tokens), want)
        assert torch.equal(ko.run_with_hooks(tokens), want)
        assert torch.equal(run(ko, tokens).logits, want)
        assert torch.allclose(ko(tokens, last_only=True)[:, -1], want[:, -1], atol=1e-5)  # same sums, other order
        acts = capture(ko, tokens, [HOOK])[HOOK]
        assert (acts[value_positions(tokens)] == 0).all()
        assert not torch.equal(acts, capture(model, tokens, [HOOK])[HOOK])


def test_knockout_with_per_sequence_positions_runs_through_run_at_its_batch_size(setup):
    model, a, _ = setup
    positions = torch.arange(len(a)) % 12
    ko = knockout(model, [Zero(Site(HOOK, positions=positions))])
    want = run(model, a, [Zero(Site(HOOK, positions=positions))]).logits
    assert torch.equal(run(ko, a).logits, want)


def test_matched_resample_cannot_be_made_permanent(setup):
    model, a, b = setup
    feature = torch.zeros(len(a), dtype=torch.long)
    with pytest.raises(InterventionError, match="tied to one batch"):
        knockout(model, [Resample(Site(HOOK, 3), b, match=(feature, torch.zeros(len(b), dtype=torch.long)))])


def test_uniform_value_attention_knockout_agrees_between_full_and_last_only_forward(setup):
    model, a, _ = setup
    ko = uniform_value_attention(model)
    assert torch.allclose(ko(a, last_only=True)[:, -1], ko(a)[:, -1], atol=1e-5)
    assert not torch.equal(ko(a, last_only=True), model(a, last_only=True))


def test_the_hook_free_training_path_refuses_a_knockout_and_temporary_hooks(setup):
    model, a, _ = setup
    with pytest.raises(HookedModelError, match="hooks attached"):
        last_logits(uniform_value_attention(model), a)
    clean = last_logits(model, a)
    model.add_hook(HOOK, lambda act, hook: torch.zeros_like(act))
    try:
        with pytest.raises(HookedModelError):
            last_logits(model, a)
        assert not torch.equal(model(a, last_only=True)[:, -1], clean)  # the hooked forward runs the hook
    finally:
        model.reset_hooks()
    assert torch.equal(last_logits(model, a), clean)


# ----- the engine's silent paths -----------------------------------
from assignadd.interventions import Mean, Patch, Project  # noqa: E402


def test_boolean_lists_and_ambiguous_integer_masks_are_refused(setup):
    model, a, _ = setup
    for positions in ([False] * 15 + [True], torch.tensor([0] * 15 + [1]), torch.zeros(16, dtype=torch.uint8)):
        with pytest.raises(InterventionError):
            run(model, a, [Zero(Site(HOOK, positions=positions))])
    mask = torch.tensor([False] * 15 + [True])
    out = run(model, a, [Zero(Site(HOOK, positions=mask))], read=[HOOK]).activations[HOOK]
    assert (out[:, 15] == 0).all() and (out[:, :15] != 0).any()


def test_patch_source_positions_out_of_range_are_refused(setup):
    model, a, _ = setup
    for bad in ([16], [-17]):
        with pytest.raises(InterventionError, match="source_positions"):
            run(model, a, [Patch(Site(HOOK, positions=[3]), a, source_positions=bad)])


def test_a_replace_that_edits_in_place_cannot_reach_cells_outside_its_site(setup):
    model, a, _ = setup
    clean = capture(model, a, [HOOK])[HOOK]
    out = run(model, a, [Replace(Site(HOOK, positions=3), lambda x, hook: x.zero_())], read=[HOOK]).activations[HOOK]
    assert (out[:, 3] == 0).all()
    assert torch.equal(out[:, 4:], clean[:, 4:]) and torch.equal(out[:, :3], clean[:, :3])


def test_pooled_mean_of_attention_scores_ignores_masked_cells_and_projection_there_is_refused(setup):
    model, a, b = setup
    scores = "blocks.0.attn.hook_attn_scores"
    out = run(model, a, [Mean(Site(scores), b, per_position=False)])
    assert torch.isfinite(out.logits).all()
    with pytest.raises(InterventionError, match="-inf"):
        Project(Site(scores), torch.eye(16)[:1])


def test_run_reports_how_much_each_intervention_changed(setup):
    model, a, _ = setup
    # Layer 1's MLP output is always zero: zeroing it fires the hook but changes nothing
    assert run(model, a, [Zero("blocks.0.hook_mlp_out")]).changed["blocks.0.hook_mlp_out"] == 0.0
    assert run(model, a, [Zero(HOOK)]).changed[HOOK] > 0.0


def test_equal_reference_batches_share_one_clean_forward(setup):
    model, a, b = setup
    calls = []
    handle = model.hook_dict["blocks.0.hook_resid_pre"].register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        run(model, a, [Mean(Site(HOOK, 3), b.clone()), Mean(Site("blocks.0.hook_resid_pre", 4), b.clone())])
    finally:
        handle.remove()
    assert len(calls) == 2  # one clean forward for both copies of b, then the intervened forward
