"""A model from outside this package whose circuit a compiler wrote: tracr's previous-token program.

``tests/fixtures/tracr_prev_token.{npz,json}`` (made by ``tools/make_tracr_fixture.py``, with JAX and
tracr; nothing here imports either) holds a one-layer, two-head transformer compiled from

    prev  = Aggregate(Select(indices, indices, q == k + 1), tokens)   # head 0: the token at t-1
    first = Aggregate(Select(indices, indices, k == 0), tokens)       # head 1: the first token
    out   = SequenceMap(lambda x, y: x, prev, first)                  # the MLP passes prev through

The compiler's bookkeeping (which residual directions each head writes) names the previous-token head,
so the generic head checks (``tests/heads.py``) have a known answer: they must pass on it and
fail on the first-token head, on the same head re-initialised, and on a freshly initialised model.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from assignadd.tests.heads import PREV_SHARE, previous_token_check
from assignadd.model import AssignAddTransformer
from assignadd.tests.tracr_export import load_tracr_export

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tracr_prev_token"


@pytest.fixture(scope="module")
def tracr():
    """(model, metadata, saved inputs (B, T), tracr's output ids (B, T), tracr's scores (B, T, d_vocab_out))."""
    model, meta = load_tracr_export(FIXTURE)
    with np.load(FIXTURE.with_suffix(".npz")) as d:
        inputs = torch.from_numpy(d["inputs"]).long()
        outputs = torch.from_numpy(d["tracr_outputs"]).long()
        scores = torch.from_numpy(d["tracr_scores"])
    return model, meta, inputs, outputs, scores


def head_of(meta: dict, role: str) -> tuple[int, int]:
    (head,) = [h for h in meta["heads"] if h["role"] == role]
    return head["layer"], head["head"]


def test_the_fixture_loads_with_its_config(tracr):
    model, meta, inputs, _, _ = tracr
    cfg = meta["config"]
    assert (model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_model) == (
        cfg["n_layers"],
        cfg["n_heads"],
        cfg["d_model"],
    )
    assert (model.cfg.d_vocab, model.cfg.d_vocab_out, model.cfg.n_ctx) == (
        cfg["d_vocab"],
        cfg["d_vocab_out"],
        cfg["n_ctx"],
    )
    assert list(model.cfg.mlp_layers) == cfg["mlp_layers"]
    assert (inputs[:, 0] == meta["bos_id"]).all()
    # The compiler names one previous-token head and one other head.
    assert sorted(h["role"] for h in meta["heads"]) == ["first_token", "previous_token"]


def test_the_converted_model_reproduces_tracr(tracr):
    """Argmax at every output position t >= 2 equals tracr's output, on every saved input; the scores
    equal tracr's everywhere. Position 1 has no previous token: the program's value is None there and
    all of tracr's scores are 0 up to rounding (a tie), which the scores' equality covers."""
    model, _, inputs, outputs, scores = tracr
    with torch.no_grad():
        logits = model(inputs)
    assert (logits[:, 2:].argmax(-1) == outputs[:, 2:]).all()
    assert torch.allclose(logits, scores, atol=1e-5)
    assert (logits[:, 1].max(-1).values - logits[:, 1].min(-1).values).max() < 1e-5


def test_the_converted_model_computes_the_program_on_every_input(tracr):
    """Every sequence of the maximum length (4^8; the model is causal, so every shorter input is a
    prefix of one): the output at t >= 2 is the token at t-1."""
    model, meta, _, _, _ = tracr
    enc, out_enc = meta["input_encoding"], meta["output_encoding"]
    words = meta["compile"]["vocab"]
    seqs = torch.tensor(list(itertools.product([enc[w] for w in words], repeat=meta["compile"]["max_seq_len"])))
    tokens = torch.cat([torch.full((len(seqs), 1), meta["bos_id"]), seqs], dim=1)
    to_out = torch.full((max(enc.values()) + 1,), -1)
    for w in words:
        to_out[enc[w]] = out_enc[w]
    with torch.no_grad():
        got = model(tokens)[:, 2:].argmax(-1)
    assert (got == to_out[tokens[:, 1:-1]]).all()


def test_the_compiled_previous_token_head_passes_both_checks(tracr):
    model, meta, inputs, _, _ = tracr
    check = previous_token_check(model, inputs, *head_of(meta, "previous_token"))
    assert check.share_prev == 1.0
    assert check.change_prev > 1.0 - 1e-6  # its whole write at t >= 2 is the token at t-1
    assert check.change_placebo < 1e-5
    assert check.attends and check.needs_previous and check.passes


def test_the_compiled_first_token_head_fails_both_checks(tracr):
    """It reads position 1 from every query: t-1 is its key only at t = 2 (one row in eight)."""
    model, meta, inputs, _, _ = tracr
    check = previous_token_check(model, inputs, *head_of(meta, "first_token"))
    assert check.share_prev == pytest.approx(1 / 8)
    assert check.change_prev < check.change_placebo
    assert not check.attends and not check.needs_previous


def test_the_previous_token_head_reinitialised_fails(tracr):
    model, meta, inputs, _, _ = tracr
    layer, head = head_of(meta, "previous_token")
    fresh = AssignAddTransformer(model.cfg, seed=0)
    reinit = AssignAddTransformer(model.cfg, seed=0)
    reinit.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            getattr(reinit.blocks[layer].attn, name)[head] = getattr(fresh.blocks[layer].attn, name)[head]
    check = previous_token_check(reinit, inputs, layer, head)
    assert check.share_prev < PREV_SHARE and not check.passes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_freshly_initialised_model_fails(tracr, seed):
    model, _, inputs, _, _ = tracr
    fresh = AssignAddTransformer(model.cfg, seed=seed)
    for head in range(model.cfg.n_heads):
        check = previous_token_check(fresh, inputs, 0, head)
        assert not check.attends and not check.needs_previous


def test_the_check_refuses_bad_arguments(tracr):
    model, _, inputs, _, _ = tracr
    with pytest.raises(ValueError, match="no head 0.5"):
        previous_token_check(model, inputs, 0, 5)
    with pytest.raises(ValueError, match="T >= 2"):
        previous_token_check(model, inputs[:, :1], 0, 0)


def test_the_loader_refuses_bad_exports(tmp_path):
    with pytest.raises(ValueError, match="no file"):
        load_tracr_export(tmp_path / "nothing")
    meta = json.loads(FIXTURE.with_suffix(".json").read_text())
    with np.load(FIXTURE.with_suffix(".npz")) as d:
        arrays = dict(d)
    arrays["embed.W_E"] = arrays["embed.W_E"][:, :-1]
    np.savez(tmp_path / "bad.npz", **arrays)
    (tmp_path / "bad.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="embed.W_E has shape"):
        load_tracr_export(tmp_path / "bad")
    meta["config"]["layernorm"] = True
    (tmp_path / "bad.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="LayerNorm"):
        load_tracr_export(tmp_path / "bad.npz")
