"""Checkpoints (SPEC §2.4): both formats load through one function; everything else is refused with
``CheckpointError``, one line naming the file and the problem, and a file that would run code is
never run.
"""

from __future__ import annotations

import builtins
import pickle

import numpy as np
import pytest
import torch

import assignadd
from assignadd import AssignAddTransformer, CheckpointError, load_checkpoint
from assignadd.model import load_checkpoint_full, save_checkpoint, state_sha256

TOKENS = torch.randint(0, 74, (6, 16), generator=torch.Generator().manual_seed(0))


class WritesMarker:
    """Unpickling this runs ``exec``, which writes a marker file: a stand-in for a malicious checkpoint."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return builtins.exec, (f"open({self.marker!r}, 'w').write('ran')",)


def assert_refused(path, *fragments):
    """Loading ``path`` raises CheckpointError: one line that names the file and each fragment."""
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert str(path) in message, message
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def same_state(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


# ----- the two formats -------------------------------------------------------------------------------
def test_bare_tl_checkpoint_loads_with_config_inferred_from_shapes(tl_checkpoint):
    model, meta = load_checkpoint_full(tl_checkpoint)
    assert meta["format"] == "transformer_lens"
    cfg = model.cfg
    assert (cfg.d_vocab, cfg.d_vocab_out, cfg.n_ctx, cfg.d_model, cfg.d_mlp, cfg.n_layers) == (74, 59, 16, 128, 512, 2)
    assert (cfg.modulus, cfg.n_vars) == (59, 12)
    assert meta["model_config"] == cfg.to_dict()


@pytest.mark.parametrize("protocol", [2, 3, 5])
def test_bare_tl_checkpoint_loads_the_same_at_any_pickle_protocol(
    tmp_path, tl_checkpoint, make_tl_state_dict, protocol
):
    # torch's weights-only unpickler reads protocol 2 only (pytorch/pytorch#118092); the authors' files
    # are protocol 4 (tl_checkpoint), which the loader rewrites without running anything.
    path = tmp_path / f"p{protocol}.pt"
    torch.save(make_tl_state_dict(seed=0), path, pickle_protocol=protocol)
    assert same_state(load_checkpoint(path).state_dict(), load_checkpoint(tl_checkpoint).state_dict())


def test_own_format_round_trip_keeps_weights_and_metadata(tmp_path):
    model = AssignAddTransformer(seed=3)
    path = tmp_path / "own.pt"
    save_checkpoint(model, path, task={"f": 0.7}, step=120, metrics={"0var_train": 0.5}, run={"seed": 3})
    loaded, meta = load_checkpoint_full(path)
    assert same_state(loaded.state_dict(), model.state_dict())
    assert meta["format"] == "assignadd.checkpoint/1"
    assert (meta["step"], meta["metrics"], meta["task"], meta["run"]) == (
        120,
        {"0var_train": 0.5},
        {"f": 0.7},
        {"seed": 3},
    )
    assert not loaded.training
    # readable by a plain weights-only load (SPEC §2.4)
    assert isinstance(torch.load(path, weights_only=True)["state_dict"], dict)


def test_own_format_with_dropped_zero_frozen_tensors_restores_them(tmp_path):
    model = AssignAddTransformer(seed=4)
    full, small = tmp_path / "full.pt", tmp_path / "small.pt"
    save_checkpoint(model, full)
    save_checkpoint(model, small, drop_zero_frozen=True)
    stored = torch.load(small, weights_only=True)["state_dict"]
    assert "blocks.0.mlp.W_in" not in stored and "blocks.1.attn.b_Q" not in stored
    assert "blocks.0.attn.mask" not in stored and "blocks.0.attn.IGNORE" not in stored
    assert small.stat().st_size < full.stat().st_size
    assert same_state(load_checkpoint(small).state_dict(), model.state_dict())
    # the weights' own digest is the file's content, not its layout: the same for both files
    assert state_sha256(load_checkpoint(small)) == state_sha256(load_checkpoint(full)) == state_sha256(model)


def test_state_digest_sees_one_changed_bit():
    model = AssignAddTransformer(seed=4)
    before = state_sha256(model)
    with torch.no_grad():
        w = model.blocks[1].mlp.W_out
        w.view(torch.int32)[0, 0] ^= 1  # the lowest bit of one float
    assert state_sha256(model) != before
    assert state_sha256(AssignAddTransformer(seed=4)) == before


def test_tl_checkpoint_saved_in_own_format_keeps_nonzero_biases_and_layer1_mlp(tmp_path, tl_checkpoint):
    tl_model = load_checkpoint(tl_checkpoint)
    for drop in (False, True):
        path = tmp_path / f"own_{drop}.pt"
        save_checkpoint(tl_model, path, drop_zero_frozen=drop)
        again = load_checkpoint(path)
        assert again.cfg.mlp_layers == (0, 1)
        assert same_state(again.state_dict(), tl_model.state_dict())
        with torch.no_grad():
            assert torch.equal(again(TOKENS), tl_model(TOKENS))


def test_loader_accepts_str_paths(tl_checkpoint):
    assert isinstance(load_checkpoint(str(tl_checkpoint)), AssignAddTransformer)


# ----- files that are not checkpoints ----------------------------------------------------------------
def test_missing_file_is_refused(tmp_path):
    assert_refused(tmp_path / "nope.pt", "no such file")


def test_directory_is_refused(tmp_path):
    assert_refused(tmp_path, "directory")


def test_empty_file_is_refused(tmp_path):
    (tmp_path / "empty.pt").write_bytes(b"")
    assert_refused(tmp_path / "empty.pt", "empty")


@pytest.mark.parametrize("fmt", ["tl", "own"])
@pytest.mark.parametrize("keep", [0.5, 0.97])
def test_truncated_file_is_refused(tmp_path, tl_checkpoint, fmt, keep):
    src = tl_checkpoint
    if fmt == "own":
        src = tmp_path / "own.pt"
        save_checkpoint(AssignAddTransformer(seed=0), src)
    data = src.read_bytes()
    path = tmp_path / "truncated.pt"
    path.write_bytes(data[: int(len(data) * keep)])
    assert_refused(path)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_bytes_are_refused(tmp_path, seed):
    path = tmp_path / "random.pt"
    path.write_bytes(np.random.default_rng(seed).bytes(5000))
    assert_refused(path)


def test_text_file_is_refused(tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 =\n")
    assert_refused(path)


def test_the_malicious_payload_really_runs_when_unpickled_unsafely(tmp_path):
    """Guards the next test: its payload must be live, or 'not run' would prove nothing."""
    marker = tmp_path / "ran_unsafely"
    pickle.loads(pickle.dumps(WritesMarker(marker)))
    assert marker.read_text() == "ran"


@pytest.mark.parametrize(
    "how", ["torch_save", "torch_save_protocol_4", "in_a_state_dict", "raw_pickle", "raw_pickle_protocol_4"]
)
def test_malicious_pickle_is_refused_and_never_run(tmp_path, make_tl_state_dict, how):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    evil = WritesMarker(marker)
    if how == "torch_save":
        torch.save(evil, path)
    elif how == "torch_save_protocol_4":
        torch.save({"embed.W_E": evil}, path, pickle_protocol=4)
    elif how == "in_a_state_dict":
        sd = make_tl_state_dict(seed=0)
        sd["unembed.b_U"] = evil
        torch.save(sd, path)
    else:
        path.write_bytes(pickle.dumps(evil, protocol=4 if how.endswith("4") else 2))
    assert_refused(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "obj, found",
    [
        ([torch.zeros(3)], "found a list"),
        (torch.zeros(74, 128), "found a Tensor"),
        ((1, 2), "found a tuple"),
        (3.5, "found a float"),
    ],
)
def test_non_dict_is_refused(tmp_path, obj, found):
    torch.save(obj, tmp_path / "x.pt")
    assert_refused(tmp_path / "x.pt", "expected a dict", found)


def _refuse_edited(tmp_path, make_tl_state_dict, save_tl_checkpoint, edit, *fragments):
    sd = make_tl_state_dict(seed=0)
    edit(sd)
    path = tmp_path / "edited.pt"
    save_tl_checkpoint(sd, path)
    return assert_refused(path, *fragments)


@pytest.mark.parametrize(
    "edit, fragments",
    [
        (lambda sd: sd.pop("embed.W_E"), ["missing key 'embed.W_E'"]),
        (lambda sd: sd.pop("blocks.1.mlp.W_in"), ["'blocks.1.mlp.W_in'"]),
        (lambda sd: sd.pop("blocks.0.attn.b_Q"), ["missing blocks.0.attn.b_Q"]),
        (lambda sd: sd.update({"blocks.0.ln1.w": torch.ones(128)}), ["unexpected blocks.0.ln1.w"]),
        (lambda sd: sd.update({"embed.W_E": [[0.0] * 128] * 74}), ["'embed.W_E' is a list"]),
        (lambda sd: sd.update({7: torch.zeros(1)}), ["string keys"]),
        (lambda sd: sd.clear(), ["missing key"]),
    ],
)
def test_wrong_keys_are_refused(tmp_path, make_tl_state_dict, save_tl_checkpoint, edit, fragments):
    _refuse_edited(tmp_path, make_tl_state_dict, save_tl_checkpoint, edit, *fragments)


@pytest.mark.parametrize(
    "key, shape, fragment",
    [
        ("blocks.0.attn.W_Q", (1, 128, 64), "'blocks.0.attn.W_K' has shape [1, 128, 128], expected [1, 128, 64]"),
        ("blocks.1.attn.W_V", (1, 128, 64), "'blocks.1.attn.W_V' has shape [1, 128, 64], expected [1, 128, 128]"),
        ("blocks.1.mlp.b_in", (511,), "'blocks.1.mlp.b_in' has shape [511], expected [512]"),
        ("unembed.b_U", (60,), "'unembed.b_U' has shape [60], expected [59]"),
        ("embed.W_E", (74, 128, 1), "'embed.W_E' has shape [74, 128, 1], expected 2 dimensions"),
        ("blocks.0.attn.W_Q", (128, 128), "expected 3 dimensions"),
        ("embed.W_E", (60, 128), "no room for variables"),
        ("blocks.0.attn.mask", (8, 8), "'blocks.0.attn.mask' has shape [8, 8], expected [16, 16]"),
    ],
)
def test_wrong_shapes_are_refused(tmp_path, make_tl_state_dict, save_tl_checkpoint, key, shape, fragment):
    def edit(sd):
        sd[key] = torch.zeros(shape, dtype=sd[key].dtype)

    _refuse_edited(tmp_path, make_tl_state_dict, save_tl_checkpoint, edit, fragment)


@pytest.mark.parametrize(
    "key, value",
    [
        ("embed.W_E", float("nan")),
        ("blocks.1.mlp.W_out", float("inf")),
        ("blocks.0.attn.b_O", float("-inf")),
        ("blocks.0.mlp.W_in", float("nan")),
        ("unembed.W_U", float("inf")),
    ],
)
def test_nan_and_inf_weights_are_refused(tmp_path, make_tl_state_dict, save_tl_checkpoint, key, value):
    def edit(sd):
        sd[key] = sd[key].clone().reshape(-1)
        sd[key][5] = value
        sd[key] = sd[key].reshape(make_tl_state_dict(seed=0)[key].shape)

    _refuse_edited(tmp_path, make_tl_state_dict, save_tl_checkpoint, edit, repr(key), "NaN or infinite")


def test_ignore_buffer_at_minus_inf_is_accepted(tl_checkpoint):
    model = load_checkpoint(tl_checkpoint)  # every TL file holds IGNORE = -inf
    assert model.blocks[0].attn.IGNORE.item() == float("-inf")


@pytest.mark.parametrize(
    "key, value, fragment",
    [
        ("blocks.0.attn.IGNORE", torch.tensor(float("nan")), "-inf"),
        ("blocks.1.attn.IGNORE", torch.tensor(-1e4), "-inf"),
        ("blocks.0.attn.mask", torch.ones(16, 16, dtype=torch.bool), "causal mask"),
        ("blocks.1.attn.mask", torch.ones(16, 16).tril(), "causal mask"),  # float, not bool
    ],
)
def test_buffers_other_than_the_architectures_are_refused(
    tmp_path, make_tl_state_dict, save_tl_checkpoint, key, value, fragment
):
    _refuse_edited(
        tmp_path, make_tl_state_dict, save_tl_checkpoint, lambda sd: sd.update({key: value}), repr(key), fragment
    )


def test_integer_weights_are_refused(tmp_path, make_tl_state_dict, save_tl_checkpoint):
    _refuse_edited(
        tmp_path,
        make_tl_state_dict,
        save_tl_checkpoint,
        lambda sd: sd.update({"unembed.W_U": sd["unembed.W_U"].long()}),
        "dtype torch.int64",
    )


def test_unknown_format_string_is_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"format": "someone.else/2", "state_dict": AssignAddTransformer(seed=0).state_dict()}, path)
    assert_refused(path, "unknown checkpoint format 'someone.else/2'")


def test_own_format_with_bad_contents_is_refused(tmp_path):
    model = AssignAddTransformer(seed=0)
    good = tmp_path / "good.pt"
    save_checkpoint(model, good)
    obj = torch.load(good, weights_only=True)

    def refused(edit, *fragments):
        bad = {**obj, "state_dict": dict(obj["state_dict"])}
        edit(bad)
        path = tmp_path / "bad.pt"
        torch.save(bad, path)
        assert_refused(path, *fragments)

    refused(lambda o: o.pop("state_dict"), "without a state_dict")
    refused(lambda o: o.update({"model_config": {"d_model": 64, "nonsense": 1}}), "bad model_config")
    refused(lambda o: o["state_dict"].pop("unembed.W_U"), "missing unembed.W_U")
    refused(lambda o: o.update({"zero_keys": ["embed.W_E"]}), "zero_keys", "'embed.W_E'")
    refused(lambda o: o["state_dict"].update({"embed.W_E": torch.full((74, 128), float("nan"))}), "NaN")


def test_checkpoint_error_is_the_public_one():
    assert assignadd.CheckpointError is CheckpointError
    assert issubclass(CheckpointError, ValueError)
