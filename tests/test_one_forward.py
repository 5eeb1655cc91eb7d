"""Attention, the MLP tail and the unembedding are written once (``model/transformer.py``); every path
that computes logits still gives the same bits as the four copies it replaced.

The reference below is a frozen copy of those paths as they were before (the hooked ``forward`` with its
``last_only`` shortcuts, ``last_block_at_last_position``, the training path ``last_logits`` and the
interface checks' ``_logits``), kept here only as the reference implementation. Each case runs the
package's path and the reference on the same model and compares with ``torch.equal``: logits, what every
hook saw, and gradients. Random models of several shapes (layers, heads, LayerNorm, MLP layers, the
last block without MLP), fresh (zero biases) and with every parameter perturbed (biases included).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from assignadd import AssignAddTransformer, Task
from assignadd.hypotheses.interfaces import _logits as interface_logits
from assignadd.model import ModelConfig
from assignadd.training.fast_forward import last_logits


# ----- the reference implementation: the paths as they were, frozen -----------------------------------
def _ref_ln(ln, x, hooked=True):
    dtype = x.dtype
    x = x.float()
    x = x - x.mean(-1, keepdim=True)
    scale = (x.pow(2).mean(-1, keepdim=True) + ln.eps).sqrt()
    if not hooked:
        return (x / scale * ln.w + ln.b).to(dtype)
    scale = ln.hook_scale(scale)
    return ln.hook_normalized(x / scale * ln.w + ln.b).to(dtype)


def _ref_ln_unhooked(ln, x):
    return x if ln is None else _ref_ln(ln, x, hooked=False)


def _ref_attention(a, x, norm=None):
    B, T, D = x.shape
    H, Dh = a.W_Q.shape[0], a.W_Q.shape[2]
    if a.split_qkv_input:
        x_h = x[:, :, None, :].expand(B, T, H, D)
        q_in, k_in, v_in = a.hook_q_input(x_h), a.hook_k_input(x_h), a.hook_v_input(x_h)
        if norm is not None:
            q_in, k_in, v_in = _ref_ln(norm, q_in), _ref_ln(norm, k_in), _ref_ln(norm, v_in)
        q = a.hook_q(torch.einsum("bthd,hde->bthe", q_in, a.W_Q) + a.b_Q)
        k = a.hook_k(torch.einsum("bthd,hde->bthe", k_in, a.W_K) + a.b_K)
        v = a.hook_v(torch.einsum("bthd,hde->bthe", v_in, a.W_V) + a.b_V)
    else:
        if norm is not None:
            x = _ref_ln(norm, x)
        W_qkv = torch.cat([a.W_Q, a.W_K, a.W_V], 0).permute(1, 0, 2).reshape(D, 3 * H * Dh)
        q, k, v = (x @ W_qkv).view(B, T, 3, H, Dh).unbind(2)
        q, k, v = a.hook_q(q + a.b_Q), a.hook_k(k + a.b_K), a.hook_v(v + a.b_V)
    scores = (q.transpose(1, 2) @ k.permute(0, 2, 3, 1)).float() / a.scale
    scores = scores.masked_fill(~a.mask[:T, :T], a.IGNORE.item())
    scores = a.hook_attn_scores(scores)
    pattern = a.hook_pattern(scores.softmax(dim=-1))
    z = a.hook_z((pattern.to(v.dtype) @ v.transpose(1, 2)).transpose(1, 2))
    return z.reshape(B, T, H * Dh) @ a.W_O.reshape(H * Dh, D) + a.b_O


def _ref_mlp(m, x):
    pre = m.hook_pre(x @ m.W_in + m.b_in)
    post = m.hook_post(F.relu(pre))
    return post @ m.W_out + m.b_out


def _ref_block(block, x):
    x = block.hook_resid_pre(x)
    resid_mid = block.hook_resid_mid(x + block.hook_attn_out(_ref_attention(block.attn, x, block.ln1)))
    if not block.has_mlp:
        mlp_out = torch.zeros_like(resid_mid)
    elif block.ln2 is not None:
        mlp_out = _ref_mlp(block.mlp, _ref_ln(block.ln2, resid_mid))
    else:
        mlp_out = _ref_mlp(block.mlp, resid_mid)
    return block.hook_resid_post(resid_mid + block.hook_mlp_out(mlp_out))


def _ref_unembed(model, x):
    return x @ model.unembed.W_U + model.unembed.b_U


_REF_UP_TO_RESID_MID = ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "attn.", "ln1.")


def _ref_mlp_unhooked(mlp, x, biases=True):
    if biases:
        return F.relu(x @ mlp.W_in + mlp.b_in) @ mlp.W_out + mlp.b_out
    return F.relu(x @ mlp.W_in) @ mlp.W_out


def _ref_last_block_at_last_position(model, x, biases=True):
    B, T, _ = x.shape
    last = model.blocks[-1]
    a = last.attn
    H, D, Dh = a.W_Q.shape
    x_last = x[:, -1]
    if last.ln1 is None:
        x_in, q_in = x, x_last
    else:
        x_in = _ref_ln_unhooked(last.ln1, x)
        q_in = x_in[:, -1]
    q = q_in @ a.W_Q.permute(1, 0, 2).reshape(D, H * Dh)
    k, v = (x_in @ W.permute(1, 0, 2).reshape(D, H * Dh) for W in (a.W_K, a.W_V))
    if biases:
        q, k, v = q + a.b_Q.reshape(H * Dh), k + a.b_K.reshape(H * Dh), v + a.b_V.reshape(H * Dh)
    k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (k, v))
    scores = (q.view(B, H, 1, Dh) @ k.transpose(-1, -2)).float() / a.scale
    z = (scores.softmax(dim=-1).to(v.dtype) @ v).reshape(B, H * Dh)
    resid = x_last + z @ a.W_O.reshape(H * Dh, D)
    if biases:
        resid = resid + a.b_O
    if last.has_mlp:
        resid = resid + _ref_mlp_unhooked(last.mlp, _ref_ln_unhooked(last.ln2, resid), biases)
    logits = _ref_ln_unhooked(model.ln_final, resid) @ model.unembed.W_U
    if biases:
        logits = logits + model.unembed.b_U
    return logits.float()


def _ref_last_block(model, x):
    from transformer_lens.hook_points import HookPoint

    last = model.blocks[-1]
    hooked = {name for name, m in last.named_modules() if isinstance(m, HookPoint) and m.has_hooks()}
    after_resid_mid = not all(name.startswith(_REF_UP_TO_RESID_MID) for name in hooked)
    if model.ln_final is not None:
        final_hooked = model.ln_final.hook_scale.has_hooks() or model.ln_final.hook_normalized.has_hooks()
        if last.attn.split_qkv_input or final_hooked or after_resid_mid:
            return _ref_unembed(model, _ref_ln(model.ln_final, _ref_block(last, x)))[:, -1].float()
    elif last.attn.split_qkv_input or after_resid_mid:
        return _ref_unembed(model, _ref_block(last, x)[:, -1]).float()
    if not hooked:
        return _ref_last_block_at_last_position(model, x)
    x = last.hook_resid_pre(x)
    resid = last.hook_resid_mid(x + last.hook_attn_out(_ref_attention(last.attn, x, last.ln1)))[:, -1]
    if last.has_mlp:
        resid = resid + _ref_mlp_unhooked(last.mlp, _ref_ln_unhooked(last.ln2, resid))
    return (_ref_ln_unhooked(model.ln_final, resid) @ model.unembed.W_U + model.unembed.b_U).float()


def _ref_forward(model, tokens, stop_at_layer=None, last_only=False):
    tokens = model.hook_tokens(tokens)
    B, T = tokens.shape
    embed = F.embedding(tokens, model.embed.W_E)
    pos = model.pos_embed.W_pos[:T].unsqueeze(0).expand(B, T, -1)
    x = model.hook_embed(embed) + model.hook_pos_embed(pos)
    if last_only and stop_at_layer is None:
        for block in model.blocks[:-1]:
            x = _ref_block(block, x)
        return _ref_last_block(model, x)[:, None]
    for block in model.blocks[:stop_at_layer]:
        x = _ref_block(block, x)
    if stop_at_layer is not None:
        return x
    if model.ln_final is not None:
        x = _ref_ln(model.ln_final, x)
    return _ref_unembed(model, x).float()


def _ref_last_logits(model, tokens, biases=True):
    B, T = tokens.shape
    x = F.embedding(tokens, model.embed.W_E) + model.pos_embed.W_pos[:T]
    for block in model.blocks[:-1]:
        a = block.attn
        H, D, Dh = a.W_Q.shape
        x_in = _ref_ln_unhooked(block.ln1, x)
        q, k, v = (x_in @ W.permute(1, 0, 2).reshape(D, H * Dh) for W in (a.W_Q, a.W_K, a.W_V))
        if biases:
            q, k, v = q + a.b_Q.reshape(H * Dh), k + a.b_K.reshape(H * Dh), v + a.b_V.reshape(H * Dh)
        q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)).float() / a.scale
        scores = scores.masked_fill(~a.mask[:T, :T], float("-inf"))
        z = scores.softmax(dim=-1).to(v.dtype) @ v
        x = x + z.transpose(1, 2).reshape(B, T, H * Dh) @ a.W_O.reshape(H * Dh, D)
        if biases:
            x = x + a.b_O
        if block.has_mlp:
            x = x + _ref_mlp_unhooked(block.mlp, _ref_ln_unhooked(block.ln2, x), biases)
    return _ref_last_block_at_last_position(model, x, biases)


def _ref_interface_logits(model, interface, base, a):
    block = model.blocks[-1]
    resid = base + a
    if interface.output == "attn_out" and block.has_mlp:
        resid = resid + _ref_mlp_unhooked(block.mlp, _ref_ln_unhooked(block.ln2, resid))
    return _ref_ln_unhooked(model.ln_final, resid) @ model.unembed.W_U + model.unembed.b_U


REFERENCE = SimpleNamespace(
    forward=lambda model, tokens, **kw: _ref_forward(model, tokens, **kw),
    last_logits=_ref_last_logits,
    interface_logits=_ref_interface_logits,
)
PACKAGE = SimpleNamespace(
    forward=lambda model, tokens, **kw: model(tokens, **kw),
    last_logits=last_logits,
    interface_logits=interface_logits,
)


# ----- the grid ---------------------------------------------------------------------------------------
SMALL = dict(d_model=32, d_mlp=48)
CONFIGS = {
    "L2H2": ModelConfig(**SMALL, d_head=16, n_heads=2, n_layers=2, mlp_layers=(1,)),
    "L2H1ln_mlp01": ModelConfig(**SMALL, d_head=32, n_heads=1, n_layers=2, mlp_layers=(0, 1), layernorm=True),
    "L3H2ln_lastnomlp": ModelConfig(**SMALL, d_head=8, n_heads=2, n_layers=3, mlp_layers=(0,), layernorm=True),
    "L3H1_mlp02": ModelConfig(**SMALL, d_head=16, n_heads=1, n_layers=3, mlp_layers=(0, 2)),
    "L2H2_nomlp": ModelConfig(**SMALL, d_head=16, n_heads=2, n_layers=2, mlp_layers=()),
    "L1H2ln": ModelConfig(**SMALL, d_head=8, n_heads=2, n_layers=1, mlp_layers=(0,), layernorm=True),
    "paper": ModelConfig(),
}


def make_model(cfg: ModelConfig, perturbed: bool) -> AssignAddTransformer:
    """Fresh (zero, frozen biases), or every parameter perturbed and trainable (biases, LayerNorm's)."""
    model = AssignAddTransformer(cfg, seed=0)
    if perturbed:
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
        for p in model.parameters():
            p.requires_grad_(True)
    return model


def hook_sets(model) -> dict[str, list[str]]:
    """Where hooks sit decides how much of the last block ``last_only`` runs in full."""
    n = model.cfg.n_layers - 1
    last = model.blocks[-1]
    sets = {
        "none": [],
        "first block": ["blocks.0.attn.hook_pattern", "hook_embed", "blocks.0.hook_resid_post"],
        "last attention": [f"blocks.{n}.attn.hook_k", f"blocks.{n}.hook_resid_mid", f"blocks.{n}.attn.hook_z"],
        "last resid_pre": [f"blocks.{n}.hook_resid_pre"],
        "last mlp_out": [f"blocks.{n}.hook_mlp_out"],
        "last resid_post": [f"blocks.{n}.hook_resid_post"],
    }
    if last.has_mlp:
        sets["last mlp"] = [f"blocks.{n}.mlp.hook_pre"]
    if model.cfg.layernorm:
        sets["last ln1"] = [f"blocks.{n}.ln1.hook_scale"]
        sets["ln_final"] = ["ln_final.hook_normalized"]
        if last.has_mlp:
            sets["last ln2"] = [f"blocks.{n}.ln2.hook_scale"]
    return sets


def _editing_hooks(names, seen):
    def edit(act, hook):
        seen.append((hook.name, act.detach().clone()))
        out = act.clone()
        out[:, -1] = out[:, -1] * 0.5 + 0.1
        return out

    return [(n, edit) for n in names]


def _grads(model):
    return {f"grad {n}": p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def run_cases(model, impl, tokens) -> dict[str, torch.Tensor]:
    """Every path's outputs on ``model`` through ``impl`` (the package or the reference)."""
    out = {}
    labels = torch.arange(len(tokens)) % model.cfg.d_vocab_out

    def record(key, fn, grad=False):
        seen = []
        model.zero_grad(set_to_none=True)
        value = fn(seen)
        out[key] = value.detach().clone()
        for i, (name, act) in enumerate(seen):
            out[f"{key} | hook {i} {name}"] = act
        if grad:
            F.cross_entropy(value.reshape(len(tokens), -1, value.shape[-1])[:, -1].float(), labels).backward()
            out.update({f"{key} | {k}": v for k, v in _grads(model).items()})

    def hooked(fwd_names, **kw):
        def fn(seen):
            with model.hooks(fwd_hooks=_editing_hooks(fwd_names, seen)):
                return impl.forward(model, tokens, **kw)

        return fn

    record("full", hooked([]), grad=True)
    record("stop_at_layer 1", hooked([], stop_at_layer=1))
    for name, names in hook_sets(model).items():
        record(f"full, hooks {name}", hooked(names))
        record(f"last_only, hooks {name}", hooked(names, last_only=True), grad=True)
    # A backward hook in the last block: it too makes last_only run that block in full.
    n = model.cfg.n_layers - 1

    def backward_hooked(seen):
        def keep(grad, hook):
            seen.append((hook.name, grad.detach().clone()))

        with model.hooks(bwd_hooks=[(f"blocks.{n}.hook_resid_post", keep)]):
            value = impl.forward(model, tokens, last_only=True)
            F.cross_entropy(value[:, -1], labels).backward()
        return value

    record("last_only, backward hook", backward_hooked)
    out.update({f"last_only, backward hook | {k}": v for k, v in _grads(model).items()})
    model.set_use_split_qkv_input(True)
    try:
        split = ["blocks.0.attn.hook_q_input", f"blocks.{n}.attn.hook_v_input"]
        record("split, full", hooked(split), grad=True)
        record("split, last_only", hooked(split, last_only=True), grad=True)
        record("split, last_only no hooks", hooked([], last_only=True))
    finally:
        model.set_use_split_qkv_input(False)
    for biases in (True, False):
        record(f"last_logits biases={biases}", lambda seen: impl.last_logits(model, tokens, biases=biases), grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            record(
                f"last_logits bf16 biases={biases}",
                lambda seen: impl.last_logits(model, tokens, biases=biases),
                grad=True,
            )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        record("full bf16", hooked([]), grad=True)
        record("last_only bf16", hooked([], last_only=True))
        record("last_only bf16, hooks last attention", hooked(hook_sets(model)["last attention"], last_only=True))
    # The interface checks' logits from the residual at `=` on, and their gradient in what crosses.
    gen = torch.Generator().manual_seed(5)
    base, a = (torch.randn(len(tokens), model.cfg.d_model, generator=gen) for _ in range(2))
    for output in ("attn_out", "mlp_out"):
        a_ = a.clone().requires_grad_(True)
        logits = impl.interface_logits(model, SimpleNamespace(output=output), base, a_)
        (grad,) = torch.autograd.grad(F.cross_entropy(logits, labels), [a_])
        out[f"interface {output}"], out[f"interface {output} | grad"] = logits.detach(), grad
    return out


@pytest.fixture(scope="module")
def tokens():
    return Task().pool("2var_heldout_pair", 24, seed=3)[0]


@pytest.fixture
def one_thread():
    """Both implementations on one thread, so that nothing but the code decides the order of sums."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("perturbed", [False, True], ids=["fresh", "perturbed"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_path_gives_the_bits_of_the_four_copies_it_replaced(name, perturbed, tokens, one_thread):
    model = make_model(CONFIGS[name], perturbed)
    got = run_cases(model, PACKAGE, tokens)
    want = run_cases(model, REFERENCE, tokens)
    assert got.keys() == want.keys()
    differ = [k for k in want if got[k].dtype != want[k].dtype or not torch.equal(got[k], want[k])]
    assert not differ, differ


def test_the_reference_sees_what_it_should(tokens, one_thread):
    """The grid is not vacuous: hooks fire and edit, paths differ from each other in the last bits where
    their matrix shapes differ, gradients are there."""
    model = make_model(CONFIGS["L2H2"], perturbed=True)
    out = run_cases(model, REFERENCE, tokens)
    assert any(k.startswith("last_only, hooks last attention | hook") for k in out)
    assert not torch.equal(out["last_only, hooks last attention"], out["last_only, hooks none"])
    assert any(k.startswith("last_logits biases=True | grad blocks.0.attn.b_O") for k in out)
    assert math.isfinite(float(out["interface attn_out"].sum()))
