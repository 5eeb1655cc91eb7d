"""Layer 1's q/k/v product read off a table of (token, position) rows (``model.transformer.EmbeddedTokens``).

The table may stand for the product only where the bits are the same: these tests compare every output
and activation with the table on and off, bit for bit, check that the table was really used (its
counter), and that every way the embedding can be changed on its way to Layer 1 (a TransformerLens
hook, a torch hook on a module, an edit in place) gets the direct product instead.
"""

from __future__ import annotations

import pytest
import torch

from assignadd import AssignAddTransformer
from assignadd.model import transformer as T
from assignadd.model.transformer import EmbeddedTokens, same_bits

B = 200  # more sequences than the vocabulary has tokens (74): the table pays


@pytest.fixture()
def model():
    m = AssignAddTransformer(seed=5).eval()
    with torch.no_grad():  # nonzero biases, so a bias added before or after the gather would show
        for name, p in m.named_parameters():
            if name.rsplit(".", 1)[-1].startswith("b_"):
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(name))) * 0.1)
    return m


@pytest.fixture()
def tokens():
    return torch.randint(0, 74, (B, 16), generator=torch.Generator().manual_seed(2))


def _uses(fn):
    """``fn()``'s result and the table's counter over it."""
    before = T.TABLE_USES.copy()
    out = fn()
    return out, T.TABLE_USES - before


def _both(monkeypatch, fn):
    """``fn()`` with the table off, then on: (off, on, counter of the run with the table on)."""
    monkeypatch.setattr(T, "EMBEDDING_TABLE", False)
    off, uses_off = _uses(fn)
    assert not uses_off, "the table was offered while switched off"
    monkeypatch.setattr(T, "EMBEDDING_TABLE", True)
    fn()  # the first product of a shape is computed both ways and compared
    on, uses = _uses(fn)
    return off, on, uses


@torch.no_grad()
@pytest.mark.parametrize("entry", ["full", "last_only", "stop_at_layer", "cache"])
def test_the_table_gives_the_direct_products_bits_and_is_used(model, tokens, monkeypatch, entry):
    def fn():
        if entry == "full":
            return {"logits": model(tokens)}
        if entry == "last_only":
            return {"logits": model(tokens, last_only=True)}
        if entry == "stop_at_layer":
            return {"resid": model(tokens, stop_at_layer=1)}
        logits, cache = model.run_with_cache(tokens)
        return {"logits": logits, **dict(cache.items())}

    off, on, uses = _both(monkeypatch, fn)
    assert off.keys() == on.keys()
    for k in off:
        assert same_bits(off[k], on[k]), k
    shape = (B, 16, 74, 128, 384, torch.float32, "cpu", torch.get_num_threads())
    if T._TABLE_SAME_BITS[shape]:  # this machine's matrix product gives a row the same bits in any batch
        assert uses == {"table": 1}, uses
    else:  # reported, not hidden: the direct product ran
        assert uses == {"direct: shape differs": 1}, uses


def _qkv(model):
    a = model.blocks[0].attn
    return torch.cat([a.W_Q, a.W_K, a.W_V], 0).permute(1, 0, 2).reshape(128, 384)


@torch.no_grad()
def test_the_verdict_on_a_shape_is_a_probes_and_agrees_with_the_models_own_product(model, tokens, monkeypatch):
    monkeypatch.setattr(T, "_TABLE_SAME_BITS", {})
    x = model.embed(tokens) + model.pos_embed(tokens)
    W = _qkv(model)
    emb = EmbeddedTokens(tokens, model.embed.W_E, model.pos_embed.W_pos)
    out, uses = _uses(lambda: emb.times(x, W))
    assert uses["probe"] == 1
    (verdict,) = T._TABLE_SAME_BITS.values()
    table = ((model.embed.W_E[:, None] + model.pos_embed.W_pos[None]).reshape(-1, 128) @ W)[
        tokens * 16 + torch.arange(16)
    ]
    assert verdict == same_bits(table, x @ W)  # the probe (random data) says what the model's data shows
    assert same_bits(out, x @ W)
    torch.testing.assert_close(table, x @ W, rtol=1e-5, atol=1e-6)  # to rounding, whatever the verdict
    _, uses = _uses(lambda: emb.times(x, W))
    assert "probe" not in uses  # once per shape


@torch.no_grad()
def test_a_shape_whose_rows_change_bits_keeps_the_direct_product_whatever_the_first_data(model, tokens, monkeypatch):
    """A BLAS whose row bits depend on the batch (simulated), met first with an all-zero product (which
    agrees both ways by accident): the verdict comes from the probe, so the direct product is kept."""
    monkeypatch.setattr(T, "_TABLE_SAME_BITS", {})
    probed = []
    monkeypatch.setattr(T, "_table_keeps_the_bits", lambda *shape: probed.append(shape[:4]) or False)
    zero = AssignAddTransformer(seed=5).eval()
    for name in ("W_Q", "W_K", "W_V"):
        getattr(zero.blocks[0].attn, name).zero_()
    (z, uses_z), (m, uses_m) = _uses(lambda: zero(tokens)), _uses(lambda: model(tokens))
    assert probed == [(B, 16, 74, 128)]
    assert uses_z == uses_m == {"direct: shape differs": 1}
    monkeypatch.setattr(T, "EMBEDDING_TABLE", False)
    assert same_bits(m, model(tokens)) and same_bits(z, zero(tokens))


@torch.no_grad()
def test_shapes_with_the_same_number_of_rows_are_probed_apart(model, monkeypatch):
    """200 sequences of 16 and 640 of 5 both make 3,200 rows, but their tables differ (1,184 and 370 rows)."""
    monkeypatch.setattr(T, "_TABLE_SAME_BITS", {})
    long = torch.randint(0, 74, (200, 16), generator=torch.Generator().manual_seed(1))
    short = torch.randint(0, 74, (640, 5), generator=torch.Generator().manual_seed(2))
    _, uses = _uses(lambda: (model(long), model(short)))
    assert uses["probe"] == 2 and len(T._TABLE_SAME_BITS) == 2


def _add_to_embedding_tl(model):
    model.hook_embed.add_hook(lambda act, hook: act + 0.25)


def _add_to_embedding_torch(model):
    model.embed.register_forward_hook(lambda mod, args, out: out + 0.25)


def _edit_resid_pre_in_place(model):
    def edit(act, hook):
        act[:, 3] *= 2.0

    model.blocks[0].hook_resid_pre.add_hook(edit)


def _one_row(model):
    def edit(act, hook):  # one sequence, one position, by the smallest step: the full comparison finds it
        act[B - 1, 7, 0] = torch.nextafter(act[B - 1, 7, 0], torch.tensor(1.0))

    model.blocks[0].hook_resid_pre.add_hook(edit)


def _pre_hook_on_block(model):
    model.blocks[0].register_forward_pre_hook(lambda mod, args: (args[0] * 1.5,))


@torch.no_grad()
@pytest.mark.parametrize(
    "edit", [_add_to_embedding_tl, _add_to_embedding_torch, _edit_resid_pre_in_place, _pre_hook_on_block, _one_row]
)
def test_an_embedding_changed_on_its_way_gets_the_direct_product(model, tokens, monkeypatch, edit):
    clean = model(tokens)
    edit(model)
    off, on, uses = _both(monkeypatch, lambda: model(tokens))
    assert not same_bits(off, clean), "the edit did not act"
    assert same_bits(off, on)
    assert uses == {"direct: not the embedding": 1}, uses


@pytest.mark.parametrize("case", ["grad", "few", "autocast", "split"])
def test_no_table_is_offered_where_it_must_not_or_cannot_pay(model, tokens, case):
    def fn():
        if case == "grad":
            return model(tokens)
        with torch.no_grad():
            if case == "few":
                return model(tokens[:148])  # twice the vocabulary: the table does not pay yet
            if case == "autocast":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return model(tokens)
            model.set_use_split_qkv_input(True)
            try:
                return model(tokens)
            finally:
                model.set_use_split_qkv_input(False)

    _, uses = _uses(fn)
    assert not uses, uses


# torch's own forward-mode decompositions load through torch.jit.script, which warns of its deprecation
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_forward_mode_tangent_is_carried_as_by_the_direct_product(model, tokens, monkeypatch):
    """``torch.func.jvp`` under ``no_grad``: a tangent on Layer 1's input that the table (built from the
    weights) would drop; the input passes the value check, so it is the tangent check that must act."""
    from torch.func import jvp

    direction = torch.randn(B, 16, 128, generator=torch.Generator().manual_seed(3))

    def f(delta):
        model.blocks[0].hook_resid_pre.add_hook(lambda act, hook: act + delta)
        try:
            return model(tokens, stop_at_layer=1)
        finally:
            model.reset_hooks()

    def tangent():
        with torch.no_grad():
            return jvp(f, (torch.zeros(B, 16, 128),), (direction,))[1]

    off, on, uses = _both(monkeypatch, tangent)
    assert off.abs().sum() > 0 and same_bits(off, on)
    assert uses == {"direct: not plain": 1}, uses


class _Logged(torch.nn.Module):
    """A wrapper around an attention module, as an instrumentation tool might put in its place."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


@torch.no_grad()
@pytest.mark.parametrize("change", ["wrapped", "subclass", "no_layers"])
def test_a_layer_1_that_is_not_the_packages_own_is_never_offered_the_tokens(tokens, monkeypatch, change):
    if change == "no_layers":
        from assignadd import ModelConfig

        m = AssignAddTransformer(ModelConfig(n_layers=0, mlp_layers=()), seed=1).eval()
    else:
        m = AssignAddTransformer(seed=5).eval()
        if change == "wrapped":
            m.blocks[0].attn = _Logged(m.blocks[0].attn)
        else:

            class Mine(T.Attention):
                def forward(self, x):
                    return super().forward(x)

            mine = Mine(m.cfg)
            mine.load_state_dict(m.blocks[0].attn.state_dict())
            m.blocks[0].attn = mine
    off, on, uses = _both(monkeypatch, lambda: m(tokens))
    assert same_bits(off, on) and not uses, uses


def test_same_bits_is_stricter_than_equality():
    assert same_bits(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]))
    assert not same_bits(torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0]))  # torch.equal says equal
    assert not same_bits(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))
    assert not same_bits(torch.zeros(2, 3), torch.zeros(3, 2))
    nan = torch.tensor([float("nan"), 1.0])
    assert same_bits(nan, nan.clone())  # the same bits, though NaN != NaN
    assert same_bits(torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.bfloat16))  # 6 bytes: int16
    base = torch.arange(9.0)
    assert same_bits(base[1:5], torch.arange(1.0, 5.0))  # at an offset no 64-bit word can start at
