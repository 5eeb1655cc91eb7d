"""The model of SPEC §2: forward semantics, the training fast path, hooks, initialisation, names.

The forward is checked against ``reference_forward`` below: SPEC §2.2 written again in plain torch,
in float64, straight from a bare TransformerLens state dict, sharing no code with ``model/``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformer_lens import ActivationCache

import assignadd
from assignadd import AssignAddTransformer, ModelConfig
from assignadd.training.fast_forward import last_logits

D_MODEL = 128
SPEC_SHAPES = {  # SPEC §2.4, the bare TransformerLens 2.x layout
    "embed.W_E": (74, 128),
    "pos_embed.W_pos": (16, 128),
    **{
        f"blocks.{l}.{k}": s
        for l in (0, 1)
        for k, s in {
            "attn.W_Q": (1, 128, 128),
            "attn.W_K": (1, 128, 128),
            "attn.W_V": (1, 128, 128),
            "attn.W_O": (1, 128, 128),
            "attn.b_Q": (1, 128),
            "attn.b_K": (1, 128),
            "attn.b_V": (1, 128),
            "attn.b_O": (128,),
            "attn.mask": (16, 16),
            "attn.IGNORE": (),
            "mlp.W_in": (128, 512),
            "mlp.b_in": (512,),
            "mlp.W_out": (512, 128),
            "mlp.b_out": (128,),
        }.items()
    },
    "unembed.W_U": (128, 59),
    "unembed.b_U": (59,),
}
HOOK_SHAPES = {  # SPEC §2.3, shapes as TransformerLens gives them for batch B = 5, T = 16
    "hook_embed": (5, 16, 128),
    "hook_pos_embed": (5, 16, 128),
    **{
        f"blocks.{l}.{h}": (5, 16, 128)
        for l in (0, 1)
        for h in ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post")
    },
    **{f"blocks.{l}.attn.hook_{h}": (5, 16, 1, 128) for l in (0, 1) for h in ("q", "k", "v", "z")},
    **{f"blocks.{l}.attn.hook_{h}": (5, 1, 16, 16) for l in (0, 1) for h in ("attn_scores", "pattern")},
    "blocks.1.mlp.hook_pre": (5, 16, 512),
    "blocks.1.mlp.hook_post": (5, 16, 512),
}


def reference_forward(sd: dict, tokens: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """SPEC §2.2 in float64: logits (B, T, 59) and the intermediate activations by hook name."""
    W = {k: v.double() for k, v in sd.items() if v.is_floating_point() and not k.endswith("IGNORE")}
    T = tokens.shape[1]
    acts = {}
    x = W["embed.W_E"][tokens] + W["pos_embed.W_pos"][:T]  # (B, T, D)
    causal = torch.ones(T, T).tril().bool()
    for layer in (0, 1):
        p = f"blocks.{layer}."
        q = torch.einsum("btd,hde->bthe", x, W[p + "attn.W_Q"]) + W[p + "attn.b_Q"]  # (B, T, H, Dh)
        k = torch.einsum("btd,hde->bthe", x, W[p + "attn.W_K"]) + W[p + "attn.b_K"]
        v = torch.einsum("btd,hde->bthe", x, W[p + "attn.W_V"]) + W[p + "attn.b_V"]
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
        scores = scores.masked_fill(~causal, float("-inf"))
        pattern = scores.softmax(-1)
        z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)
        attn_out = torch.einsum("bqhe,hed->bqd", z, W[p + "attn.W_O"]) + W[p + "attn.b_O"]
        resid_mid = x + attn_out
        pre = resid_mid @ W[p + "mlp.W_in"] + W[p + "mlp.b_in"]
        post = pre.relu()
        mlp_out = post @ W[p + "mlp.W_out"] + W[p + "mlp.b_out"]
        acts.update(
            {
                p + "attn.hook_pattern": pattern,
                p + "attn.hook_attn_scores": scores,
                p + "attn.hook_z": z,
                p + "hook_resid_mid": resid_mid,
                p + "mlp.hook_pre": pre,
                p + "hook_mlp_out": mlp_out,
            }
        )
        x = resid_mid + mlp_out
        acts[p + "hook_resid_post"] = x
    return x @ W["unembed.W_U"] + W["unembed.b_U"], acts


@pytest.fixture(scope="module")
def tokens(paper_task):
    """Task sequences and arbitrary token strings (the model may be asked anything)."""
    task_seqs = paper_task.sample_batch(24, np.random.default_rng(0))[0]
    arbitrary = torch.randint(0, 74, (8, 16), generator=torch.Generator().manual_seed(1))
    return torch.cat([task_seqs, arbitrary])


def _close(a, b, atol=2e-5, rtol=1e-4):
    torch.testing.assert_close(a.double(), b.double(), atol=atol, rtol=rtol)


# ----- forward against the independent implementation ----------------------------------------------
def test_forward_matches_independent_implementation_on_bare_tl_checkpoint(tl_checkpoint, tokens, make_tl_state_dict):
    sd = make_tl_state_dict(seed=0)  # what tl_checkpoint holds
    model = assignadd.load_checkpoint(tl_checkpoint)
    assert not model.training
    # The file has a nonzero Layer-1 MLP: the loader turns it on.
    assert model.cfg.mlp_layers == (0, 1) and model.blocks[0].has_mlp
    with torch.no_grad():
        logits = model(tokens)
    expected, _ = reference_forward(sd, tokens)
    assert logits.shape == (32, 16, 59) and logits.dtype == torch.float32
    assert expected.abs().max() > 0.5  # a real signal, not all-near-zero logits
    _close(logits, expected)


def test_zero_layer1_mlp_in_a_tl_checkpoint_stays_off_and_matches(
    tmp_path, tokens, make_tl_state_dict, save_tl_checkpoint
):
    sd = make_tl_state_dict(seed=3, layer1_mlp=False)
    save_tl_checkpoint(sd, tmp_path / "tl.pt")
    model = assignadd.load_checkpoint(tmp_path / "tl.pt")
    assert model.cfg.mlp_layers == (1,) and not model.blocks[0].has_mlp
    with torch.no_grad():
        _close(model(tokens), reference_forward(sd, tokens)[0])


def test_loaded_model_state_equals_the_file_buffers_included(tl_checkpoint, make_tl_state_dict):
    sd = make_tl_state_dict(seed=0)  # what tl_checkpoint holds
    loaded = assignadd.load_checkpoint(tl_checkpoint).state_dict()
    assert list(loaded) == list(sd)
    for k in sd:
        assert loaded[k].dtype == sd[k].dtype and torch.equal(loaded[k], sd[k]), k


def test_run_with_cache_gives_an_activation_cache_with_every_spec_hook(tl_checkpoint, tokens, make_tl_state_dict):
    sd = make_tl_state_dict(seed=0)  # what tl_checkpoint holds
    model = assignadd.load_checkpoint(tl_checkpoint)
    logits, cache = model.run_with_cache(tokens[:5])
    assert isinstance(cache, ActivationCache)
    for name, shape in HOOK_SHAPES.items():
        assert name in cache, name
        assert tuple(cache[name].shape) == shape, (name, tuple(cache[name].shape))
        assert name in model.hook_dict
    # The cached values are the forward's: compare with the independent implementation.
    _, acts = reference_forward(sd, tokens[:5])
    for name, value in acts.items():
        if name in cache:
            got, want = cache[name].double(), value
            finite = torch.isfinite(want)
            assert torch.equal(torch.isfinite(got), finite), name  # masked scores are -inf in both
            _close(got[finite], want[finite])
    # TransformerLens' shorthand indexing works on it.
    assert torch.equal(cache["pattern", 0], cache["blocks.0.attn.hook_pattern"])
    assert torch.equal(cache["resid_mid", 1], cache["blocks.1.hook_resid_mid"])
    _close(logits, model(tokens[:5]))


def test_hooks_change_what_flows(tokens):
    """A legacy-name hook that zeroes Layer 2's attention output removes it from the logits."""
    model = AssignAddTransformer(seed=0).eval()
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_attn_out", lambda t, hook: t * 0)])
        resid_mid = cache["blocks.0.hook_resid_post"]
        post = F.relu(resid_mid @ model.blocks[1].mlp.W_in) @ model.blocks[1].mlp.W_out
        expected = (resid_mid + post) @ model.unembed.W_U
    _close(ablated, expected)


# ----- the training fast path ------------------------------------------------------------------------
def _grads(model, loss_fn):
    model.zero_grad(set_to_none=True)
    loss_fn().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_last_logits_equals_full_forward_with_nonzero_biases_and_layer1_mlp(tl_checkpoint, tokens):
    model = assignadd.load_checkpoint(tl_checkpoint)
    for p in model.parameters():  # gradients for the frozen biases too: they take part in both paths
        p.requires_grad_(True)
    labels = torch.randint(0, 59, (len(tokens),), generator=torch.Generator().manual_seed(2))
    weights = torch.randn(len(tokens), 59, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        _close(last_logits(model, tokens), model(tokens)[:, -1], atol=1e-5)

    def loss(logits):
        return F.cross_entropy(logits, labels) + (logits * weights).mean()

    full = _grads(model, lambda: loss(model(tokens)[:, -1]))
    fast = _grads(model, lambda: loss(last_logits(model, tokens)))
    assert set(full) == set(fast) == {n for n, _ in model.named_parameters()}
    for name in full:
        if not name.endswith("attn.b_K"):  # b_K shifts every score of a query alike: zero gradient
            assert full[name].abs().max() > 0, name
        _close(fast[name], full[name], atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("biases", [True, False])
def test_last_logits_equals_full_forward_on_fresh_init(tokens, biases):
    model = AssignAddTransformer(seed=0)
    assert model.biases_are_zero()
    labels = torch.randint(0, 59, (len(tokens),), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _close(last_logits(model, tokens, biases=biases), model(tokens)[:, -1], atol=1e-6)
    full = _grads(model, lambda: F.cross_entropy(model(tokens)[:, -1], labels))
    fast = _grads(model, lambda: F.cross_entropy(last_logits(model, tokens, biases=biases), labels))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert set(full) == set(fast) == trainable
    for name in full:
        _close(fast[name], full[name], atol=1e-7, rtol=1e-4)


# Where a hook sits decides how much of the last block ``forward(last_only=True)`` may skip.
_LAST_ONLY_HOOKS = {
    "none": [],
    "layer 1 only": ["blocks.0.attn.hook_pattern"],
    "last block up to resid_mid": ["blocks.1.attn.hook_k", "blocks.1.hook_resid_mid"],
    "last block MLP": ["blocks.1.mlp.hook_pre"],
    "after the last block": ["blocks.1.hook_resid_post"],
}


@pytest.mark.parametrize("where", list(_LAST_ONLY_HOOKS))
def test_last_only_forward_fires_every_hook_as_the_full_forward(tl_checkpoint, tokens, where):
    """Same last-position logits as the full forward, with and without editing hooks; every hook fires
    once with the full forward's shape, and an edit that must move the answer moves it."""
    model = assignadd.load_checkpoint(tl_checkpoint)  # non-zero biases everywhere
    names = _LAST_ONLY_HOOKS[where]
    seen = {}

    def edit(act, hook):
        seen.setdefault(hook.name, []).append(tuple(act.shape))
        out = act.clone()
        out[:, -1] = out[:, -1] * 0.5 + 0.1  # moves what the last position reads
        return out

    with torch.no_grad():
        full = model.run_with_hooks(tokens, fwd_hooks=[(n, edit) for n in names])
        full_shapes, seen = seen, {}
        last = model.run_with_hooks(tokens, fwd_hooks=[(n, edit) for n in names], last_only=True)
        clean = model(tokens, last_only=True)
    assert last.shape == (len(tokens), 1, 59)
    assert seen == full_shapes and all(len(v) == 1 for v in seen.values()) and set(seen) == set(names)
    _close(last[:, 0], full[:, -1], atol=1e-5)
    _close(clean[:, 0], model(tokens)[:, -1], atol=1e-5)
    if names:
        assert (last - clean).abs().max() > 1e-3  # the edits acted


def test_last_logits_under_bf16_autocast_tracks_fp32(tokens):
    model = AssignAddTransformer(seed=0)
    with torch.no_grad():
        fp32 = last_logits(model, tokens)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = last_logits(model, tokens, biases=False)
            full_bf16 = model(tokens)[:, -1]
    assert bf16.dtype == torch.float32
    scale = fp32.abs().max().item()
    assert (bf16 - fp32).abs().max().item() < 0.05 * scale
    assert (full_bf16 - fp32).abs().max().item() < 0.05 * scale


# ----- initialisation and names ----------------------------------------------------------------------
def test_init_is_transformer_lens_default_with_zero_frozen_biases_and_layer1_mlp():
    model = AssignAddTransformer(seed=0)
    std = 0.8 / math.sqrt(D_MODEL)
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("b_") or name.startswith("blocks.0.mlp."):
            assert not p.any() and not p.requires_grad, name
        else:
            assert leaf.startswith("W_") and p.requires_grad, name
            n = p.numel()
            assert abs(p.std().item() / std - 1) < 5 / math.sqrt(2 * n), (name, p.std().item())
            assert abs(p.mean().item()) < 5 * std / math.sqrt(n), name
    assert model.cfg.mlp_layers == (1,)
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {
        "embed.W_E",
        "pos_embed.W_pos",
        "unembed.W_U",
        "blocks.1.mlp.W_in",
        "blocks.1.mlp.W_out",
        *(f"blocks.{l}.attn.W_{m}" for l in (0, 1) for m in "QKVO"),
    }
    assert [p for p in model.trainable_parameters] == [p for p in model.parameters() if p.requires_grad]


def test_init_is_seeded():
    a, b, c = (AssignAddTransformer(seed=s).state_dict() for s in (0, 0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["embed.W_E"], c["embed.W_E"])


def test_state_dict_keys_and_shapes_are_exactly_spec():
    sd = AssignAddTransformer(seed=0).state_dict()
    assert {k: tuple(v.shape) for k, v in sd.items()} == SPEC_SHAPES
    for layer in (0, 1):
        mask, ignore = sd[f"blocks.{layer}.attn.mask"], sd[f"blocks.{layer}.attn.IGNORE"]
        assert mask.dtype == torch.bool and torch.equal(mask, torch.ones(16, 16).tril().bool())
        assert ignore.is_floating_point() and ignore.item() == float("-inf")
    assert {n for n, _ in AssignAddTransformer(seed=0).named_buffers()} == {
        f"blocks.{l}.attn.{b}" for l in (0, 1) for b in ("mask", "IGNORE")
    }


def test_model_config_reads_modulus_and_variables_from_the_vocabulary():
    cfg = ModelConfig()
    assert (cfg.modulus, cfg.n_vars, cfg.n_ctx, cfg.d_model, cfg.d_mlp, cfg.n_layers) == (59, 12, 16, 128, 512, 2)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_no_module_reads_torchs_private_hook_tables():
    """Which hooks are attached is asked through TransformerLens' public ``HookPoint.has_hooks``, never by
    reading torch's private ``_forward_hooks`` / ``_forward_pre_hooks``."""
    from pathlib import Path

    root = Path(assignadd.__file__).resolve().parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if ".venv" not in p.parts
        and p.name != "test_model.py"
        and any(n in p.read_text(encoding="utf-8") for n in ("._forward_hooks", "._forward_pre_hooks"))
    ]
    assert not offenders, offenders
