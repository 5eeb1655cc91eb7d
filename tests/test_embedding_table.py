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
    shape = (B * 16, 128, 384, torch.float32, "cpu", torch.get_num_threads())
    if T._TABLE_SAME_BITS[shape]:  # this machine's matrix product gives a row the same bits in any batch
        assert uses == {"table": 1}, uses
    else:  # reported, not hidden: the direct product ran
        assert uses == {"direct: shape differs": 1}, uses


@torch.no_grad()
def test_the_first_product_of_a_shape_is_direct_and_its_verdict_is_the_comparison(model, tokens, monkeypatch):
    monkeypatch.setattr(T, "_TABLE_SAME_BITS", {})
    x = model.embed(tokens) + model.pos_embed(tokens)
    a = model.blocks[0].attn
    W = torch.cat([a.W_Q, a.W_K, a.W_V], 0).permute(1, 0, 2).reshape(128, 384)
    emb = EmbeddedTokens(tokens, model.embed.W_E, model.pos_embed.W_pos)
    first, uses = _uses(lambda: emb.times(x, W))
    assert uses == {"direct: first of its shape": 1}
    assert same_bits(first, x @ W)
    table = ((model.embed.W_E[:, None] + model.pos_embed.W_pos[None]).reshape(-1, 128) @ W)[
        tokens * 16 + torch.arange(16)
    ]
    (verdict,) = T._TABLE_SAME_BITS.values()
    assert verdict == same_bits(table, x @ W)
    # the table's rows are the product's, to rounding at least, whatever the verdict
    torch.testing.assert_close(table, x @ W, rtol=1e-5, atol=1e-6)
    # a shape whose bits differ keeps the direct product
    T._TABLE_SAME_BITS[next(iter(T._TABLE_SAME_BITS))] = False
    again, uses = _uses(lambda: emb.times(x, W))
    assert uses == {"direct: shape differs": 1} and same_bits(again, x @ W)


def _add_to_embedding_tl(model):
    model.hook_embed.add_hook(lambda act, hook: act + 0.25)


def _add_to_embedding_torch(model):
    model.embed.register_forward_hook(lambda mod, args, out: out + 0.25)


def _edit_resid_pre_in_place(model):
    def edit(act, hook):
        act[:, 3] *= 2.0

    model.blocks[0].hook_resid_pre.add_hook(edit)


def _pre_hook_on_block(model):
    model.blocks[0].register_forward_pre_hook(lambda mod, args: (args[0] * 1.5,))


@torch.no_grad()
@pytest.mark.parametrize(
    "edit", [_add_to_embedding_tl, _add_to_embedding_torch, _edit_resid_pre_in_place, _pre_hook_on_block]
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
                return model(tokens[:74])
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


def test_same_bits_is_stricter_than_equality():
    assert same_bits(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]))
    assert not same_bits(torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0]))  # torch.equal says equal
    assert not same_bits(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))
    assert not same_bits(torch.zeros(2, 3), torch.zeros(3, 2))
    nan = torch.tensor([float("nan"), 1.0])
    assert same_bits(nan, nan.clone())  # the same bits, though NaN != NaN
    assert same_bits(torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.bfloat16))  # 6 bytes: int16
