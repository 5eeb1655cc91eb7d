"""The model as TransformerLens and nnsight expect a model to be.

TransformerLens' ``patching`` functions and ``ActivationCache``'s decompositions read a handful of
config fields and model methods; with them, each runs on this model and agrees with this package's own
intervention engine (``assignadd.interventions``) to float32 precision, example by example.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformer_lens import patching

from assignadd import AssignAddTransformer, Task
from assignadd.interventions import Site, activation_patch, patch_sweep, path_patch

N_EXAMPLES = 6
ATOL = 1e-5
HOOK_OF = {  # TransformerLens' activation name -> this model's hook, per layer
    "resid_pre": "blocks.{l}.hook_resid_pre",
    "resid_mid": "blocks.{l}.hook_resid_mid",
    "attn_out": "blocks.{l}.hook_attn_out",
    "mlp_out": "blocks.{l}.hook_mlp_out",
    "z": "blocks.{l}.attn.hook_z",
    "q": "blocks.{l}.attn.hook_q",
    "k": "blocks.{l}.attn.hook_k",
    "v": "blocks.{l}.attn.hook_v",
    "pattern": "blocks.{l}.attn.hook_pattern",
}


@pytest.fixture(scope="module")
def model():
    # Nonzero biases, so the bias terms of the decompositions are exercised too.
    m = AssignAddTransformer(seed=0).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.rsplit(".", 1)[-1].startswith("b_") and ".0.mlp." not in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return m


@pytest.fixture(scope="module")
def batches():
    task = Task()
    clean, clean_labels = task.pool("1var_train", N_EXAMPLES, seed=0)
    corrupted, _ = task.pool("2var_train", N_EXAMPLES, seed=1)
    return clean, clean_labels, corrupted


@pytest.fixture(scope="module")
def clean_cache(model, batches):
    return model.run_with_cache(batches[0])[1]


def answer_logit(labels):
    """Per example: the logit of the clean answer at the last position."""
    return lambda logits: logits[:, -1].gather(1, labels[:, None].to(logits.device))[:, 0]


def tl_values(fn, model, batches, clean_cache):
    """TransformerLens' per-example results: [*index axes, batch]."""
    clean, labels, corrupted = batches
    return fn(model, corrupted, clean_cache, answer_logit(labels), reduce="none").values


def ours(model, batches, name, positions):
    """This package's engine: patch_sweep, clean into corrupted (denoising): [layer, position set, batch]."""
    clean, labels, corrupted = batches
    return patch_sweep(
        model,
        clean,
        corrupted,
        [HOOK_OF[name].format(l=l) for l in range(model.cfg.n_layers)],
        positions,
        answer_logit(labels),
        direction="denoise",
    )


def test_config_answers_every_field_transformer_lens_reads(model):
    cfg = model.cfg
    assert cfg.device == "cpu" and cfg.n_key_value_heads is None and cfg.normalization_type is None
    assert cfg.attn_only is False  # Layer 2 has an MLP
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_mlp) == (2, 1, 128, 512)
    assert "device" not in cfg.to_dict()  # where the weights are is no part of a checkpoint


def test_config_device_follows_the_model_and_leaves_shared_configs_alone(model):
    moved = copy.deepcopy(model).to("meta")
    assert moved.cfg.device == "meta" and model.cfg.device == "cpu"
    assert moved.cfg == model.cfg  # the device is not compared
    assert AssignAddTransformer(moved.cfg).cfg.device == "cpu"  # a new model says where its own weights are


@pytest.mark.parametrize("name", ["resid_pre", "resid_mid", "attn_out", "mlp_out"])
def test_layer_position_patching_matches_patch_sweep(model, batches, clean_cache, name):
    fn = getattr(patching, f"get_act_patch_{name}")
    theirs = tl_values(fn, model, batches, clean_cache)  # [layer, pos, batch]
    assert theirs.shape == (2, 16, N_EXAMPLES)
    torch.testing.assert_close(theirs, ours(model, batches, name, list(range(16))), atol=ATOL, rtol=0)


@pytest.mark.parametrize("component, name", [("out", "z"), ("q", "q"), ("k", "k"), ("v", "v")])
def test_head_vector_patching_by_position_matches_patch_sweep(model, batches, clean_cache, component, name):
    fn = getattr(patching, f"get_act_patch_attn_head_{component}_by_pos")
    theirs = tl_values(fn, model, batches, clean_cache)  # [layer, pos, head, batch]
    torch.testing.assert_close(theirs[:, :, 0], ours(model, batches, name, list(range(16))), atol=ATOL, rtol=0)


@pytest.mark.parametrize("component, name", [("out", "z"), ("q", "q"), ("k", "k"), ("v", "v"), ("pattern", "pattern")])
def test_head_patching_at_all_positions_matches_patch_sweep(model, batches, clean_cache, component, name):
    fn = getattr(patching, f"get_act_patch_attn_head_{component}_all_pos")
    theirs = tl_values(fn, model, batches, clean_cache)  # [layer, head, batch]
    torch.testing.assert_close(theirs, ours(model, batches, name, [None]), atol=ATOL, rtol=0)


def test_pattern_patching_by_query_position_matches_patch_sweep(model, batches, clean_cache):
    theirs = tl_values(patching.get_act_patch_attn_head_pattern_by_pos, model, batches, clean_cache)
    # [layer, head, dest_pos, batch]
    torch.testing.assert_close(theirs[:, 0], ours(model, batches, "pattern", list(range(16))), atol=ATOL, rtol=0)


def test_pattern_patching_by_query_and_key_matches_activation_patch(model, batches, clean_cache):
    clean, labels, corrupted = batches
    theirs = tl_values(patching.get_act_patch_attn_head_pattern_dest_src_pos, model, batches, clean_cache)
    assert theirs.shape == (2, 1, 16, 16, N_EXAMPLES)  # [layer, head, dest_pos, src_pos, batch]
    metric = answer_logit(labels)
    for layer, dest, src in [(0, 15, 13), (0, 15, 14), (0, 3, 2), (1, 15, 3), (1, 15, 15), (1, 7, 0)]:
        site = Site(f"blocks.{layer}.attn.hook_pattern", dest, keys=src)
        mine = metric(activation_patch(model, clean, corrupted, [site], "denoise").logits)
        torch.testing.assert_close(theirs[layer, 0, dest, src], mine, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "every, parts",
    [
        ("get_act_patch_block_every", ["get_act_patch_resid_pre", "get_act_patch_attn_out", "get_act_patch_mlp_out"]),
        (
            "get_act_patch_attn_head_all_pos_every",
            [f"get_act_patch_attn_head_{c}_all_pos" for c in ("out", "q", "k", "v", "pattern")],
        ),
    ],
)
def test_the_every_helpers_stack_the_single_sweeps(model, batches, clean_cache, every, parts):
    clean, labels, corrupted = batches
    metric = lambda logits: answer_logit(labels)(logits).mean()  # noqa: E731 (their default: a scalar metric)
    stacked = getattr(patching, every)(model, corrupted, clean_cache, metric)
    singles = torch.stack([getattr(patching, p)(model, corrupted, clean_cache, metric) for p in parts])
    torch.testing.assert_close(stacked, singles, atol=ATOL, rtol=0)


def test_attn_head_by_pos_every_runs(model, batches, clean_cache):
    clean, labels, corrupted = batches
    out = patching.get_act_patch_attn_head_by_pos_every(
        model, corrupted, clean_cache, lambda logits: answer_logit(labels)(logits).mean()
    )
    assert out.shape == (5, 2, 16, 1)


@pytest.mark.parametrize("component", ["q", "k", "v"])
def test_direct_path_patching_matches_our_path_patch(model, batches, clean_cache, component):
    """TransformerLens' direct path (Layer 1's head -> one input of Layer 2's head) against our path
    patching with the same sender and receiver: the same edge, so the same answer logits."""
    clean, labels, corrupted = batches
    corrupted_cache = model.run_with_cache(corrupted)[1]
    metric = answer_logit(labels)
    theirs = patching.get_act_patch_direct_path(
        model,
        corrupted,
        clean_cache,
        corrupted_cache,
        lambda logits: metric(logits).mean(),
        0,
        0,
        component,
        verbose=False,
    )
    ours = path_patch(model, corrupted, clean, "blocks.0.hook_attn_out", [f"blocks.1.attn.hook_{component}"])
    assert theirs[0, 0] == 0.0  # rows at or before the source layer are placeholders
    torch.testing.assert_close(theirs[1, 0], metric(ours.logits).mean().to(theirs.dtype), rtol=1e-4, atol=1e-4)
    assert not any(block.attn.split_qkv_input for block in model.blocks)  # switched back off
    if component == "v":  # the edge mattered (through a random model's queries and keys it hardly does: 4e-6)
        assert abs(float(theirs[1, 0]) - float(metric(model(corrupted).detach()).mean())) > 1e-3


# ----- ActivationCache ------------------------------------------------------------------------------
def test_decompose_resid_sums_to_the_residual_stream(clean_cache):
    stack, labels = clean_cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "pos_embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    torch.testing.assert_close(stack.sum(0), clean_cache["blocks.1.hook_resid_post"], atol=ATOL, rtol=0)
    into_mlp2 = clean_cache.decompose_resid(layer=1, mlp_input=True)
    torch.testing.assert_close(into_mlp2.sum(0), clean_cache["blocks.1.hook_resid_mid"], atol=ATOL, rtol=0)


def test_apply_ln_to_stack_is_the_identity_without_layernorm(clean_cache):
    stack = clean_cache.decompose_resid()
    assert torch.equal(clean_cache.apply_ln_to_stack(stack), stack)
    assert torch.equal(clean_cache.decompose_resid(apply_ln=True), stack)


def test_logit_attrs_add_up_to_the_model_logits(model, batches, clean_cache):
    clean, labels, _ = batches
    stack = clean_cache.decompose_resid(pos_slice=-1)  # [component, batch, d_model]
    attrs = clean_cache.logit_attrs(stack, labels)  # [component, batch]
    logits = model(clean)[:, -1]
    torch.testing.assert_close(
        attrs.sum(0) + model.unembed.b_U[labels], logits.gather(1, labels[:, None])[:, 0], atol=1e-4, rtol=0
    )
    wrong = (labels + 1) % 59
    diff = clean_cache.logit_attrs(stack, labels, incorrect_tokens=wrong).sum(0)
    torch.testing.assert_close(
        diff + model.unembed.b_U[labels] - model.unembed.b_U[wrong],
        logits.gather(1, labels[:, None])[:, 0] - logits.gather(1, wrong[:, None])[:, 0],
        atol=1e-4,
        rtol=0,
    )
    # A word names an output class too.
    torch.testing.assert_close(clean_cache.logit_attrs(stack, "27"), clean_cache.logit_attrs(stack, 27))


def test_accumulated_resid_and_full_decomposition_match_the_stream(clean_cache):
    acc, labels = clean_cache.accumulated_resid(return_labels=True)
    assert labels == ["0_pre", "1_pre", "final_post"]
    torch.testing.assert_close(acc[-1], clean_cache["blocks.1.hook_resid_post"])
    full, labels = clean_cache.get_full_resid_decomposition(expand_neurons=False, return_labels=True)
    assert labels[:2] == ["L0H0", "L1H0"] and labels[-1] == "bias"
    torch.testing.assert_close(full.sum(0), clean_cache["blocks.1.hook_resid_post"], atol=ATOL, rtol=0)


def test_tokens_to_residual_directions_are_unembedding_columns(model):
    torch.testing.assert_close(
        model.tokens_to_residual_directions(torch.tensor([3, 58])), model.unembed.W_U[:, [3, 58]].T
    )
    torch.testing.assert_close(model.tokens_to_residual_directions("7"), model.unembed.W_U[:, 7])
    with pytest.raises(ValueError, match="output classes 0..58"):
        model.tokens_to_residual_directions("a")  # a variable is not something the model predicts


# ----- nnsight -------------------------------------------------------------------------------------
def test_nnsight_traces_text_turned_into_tokens(model):
    import nnsight

    tokens = model.to_tokens(["a=3 b=4 + a b =", "+ 1 2 ="])
    wrapped = nnsight.NNsight(model)
    with torch.no_grad(), wrapped.trace(tokens):
        pattern = wrapped.blocks[0].attn.hook_pattern.output.save()
        logits = wrapped.output.save()
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(pattern, cache["blocks.0.attn.hook_pattern"])
    torch.testing.assert_close(logits, model(tokens))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_patching_allocates_its_results_where_the_model_is(batches):
    model = AssignAddTransformer(seed=0).eval().to("cuda")
    assert model.cfg.device.startswith("cuda")
    clean, labels, corrupted = (t.cuda() for t in batches)
    cache = model.run_with_cache(clean)[1]
    out = patching.get_act_patch_resid_pre(model, corrupted, cache, lambda logits: answer_logit(labels)(logits).mean())
    assert out.device.type == "cuda" and model.to("cpu").cfg.device == "cpu"
