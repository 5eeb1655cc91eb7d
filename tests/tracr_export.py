"""Models built outside this package, loaded into ``AssignAddTransformer``: a tracr export.

The intuition: a transformer compiled by tracr from a RASP program has a circuit known by construction,
so it is a model on which a check of "this head is a previous-token head" must pass for the compiled
head and fail for the others. tracr needs JAX; this loader does not. An export is a pair of files:

    NAME.npz    the weights under TransformerLens' state-dict names (``embed.W_E`` (d_vocab, d_model),
                ``pos_embed.W_pos`` (n_ctx, d_model), ``blocks.L.attn.W_Q`` (n_heads, d_model, d_head),
                ``blocks.L.attn.W_O`` (n_heads, d_head, d_model), ``blocks.L.mlp.W_in`` (d_model, d_mlp),
                ``unembed.W_U`` (d_model, d_vocab_out), and their biases where tracr has them)
    NAME.json   ``config`` (n_layers, n_heads, d_model, d_head, d_mlp, n_ctx, d_vocab, d_vocab_out,
                mlp_layers, layernorm), the encodings and whatever else the exporter records

``tools/make_tracr_fixture.py`` writes one (tests/fixtures/tracr_prev_token). tracr's layers alternate
``layer_L/attn`` and ``layer_L/mlp``, which is this model's block L (attention, then MLP); a layer whose
MLP tracr left out is a block without MLP (``mlp_layers``), whose MLP weights stay zero.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from assignadd.model.transformer import AssignAddTransformer, ModelConfig

_CONFIG_FIELDS = ("n_layers", "n_heads", "d_model", "d_head", "d_mlp", "n_ctx", "d_vocab", "d_vocab_out")


def load_tracr_export(path: str | Path) -> tuple[AssignAddTransformer, dict]:
    """``NAME.npz`` + ``NAME.json`` (``path`` names either, or NAME) -> (model, the JSON's contents).

    Every parameter the export names is copied; one it does not name keeps its structural zero (the
    biases, the MLP of a block without MLP). Raises ValueError, one line, for a missing file, a config
    this model cannot hold (LayerNorm, non-causal attention), a tensor of the wrong shape or an unknown name.
    """
    base = Path(path)
    base = base.with_suffix("") if base.suffix in (".npz", ".json") else base
    npz, meta_file = base.with_suffix(".npz"), base.with_suffix(".json")
    for f in (npz, meta_file):
        if not f.is_file():
            raise ValueError(f"tracr export: no file {f}")
    meta = json.loads(meta_file.read_text())
    cfg = meta.get("config", {})
    missing = [k for k in _CONFIG_FIELDS if k not in cfg]
    if missing:
        raise ValueError(f"tracr export {meta_file}: config lacks {', '.join(missing)}")
    if cfg.get("layernorm", False):
        raise ValueError(f"tracr export {meta_file}: a model with LayerNorm is not supported")
    if not cfg.get("causal", True):
        raise ValueError(f"tracr export {meta_file}: attention is not causal; this model's always is")
    model = AssignAddTransformer(
        ModelConfig(
            **{k: int(cfg[k]) for k in _CONFIG_FIELDS},
            mlp_layers=tuple(int(m) for m in cfg.get("mlp_layers", ())),
        ),
        seed=0,
    )
    state = model.state_dict()
    # Start from zeros: whatever the export does not name is zero in a compiled model.
    state = {
        k: torch.zeros_like(v) if v.is_floating_point() and k.rsplit(".", 1)[-1] != "IGNORE" else v
        for k, v in state.items()
    }
    with np.load(npz) as arrays:
        for name in arrays.files:
            if name in ("inputs", "tracr_outputs", "tracr_scores"):  # the exporter's check data, not weights
                continue
            if name not in state:
                raise ValueError(f"tracr export {npz}: {name!r} is not a parameter of this model")
            value = torch.from_numpy(np.asarray(arrays[name], dtype=np.float32))
            if value.shape != state[name].shape:
                raise ValueError(
                    f"tracr export {npz}: {name} has shape {tuple(value.shape)}, the config gives "
                    f"{tuple(state[name].shape)}"
                )
            state[name] = value
    model.load_state_dict(state)
    model.eval()
    return model, meta
