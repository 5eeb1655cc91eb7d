"""Loading and saving checkpoints in the two formats of SPEC §2.4.

1. A bare TransformerLens 2.x state dict (the paper's authors' format): no config, so it is inferred
   from the shapes.
2. Our own: ``{"format": "assignadd.checkpoint/1", "state_dict", "model_config", "task", "step",
   "metrics", "run"}``.

Both are read with ``torch.load(weights_only=True)``: a file that would run code is refused, never run.
Every problem raises ``CheckpointError`` with one line naming the file and what was wrong.
"""
from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path

import torch

from .transformer import AssignAddTransformer, ModelConfig

FORMAT = "assignadd.checkpoint/1"


class CheckpointError(ValueError):
    """A file that is not a loadable assignadd or TransformerLens checkpoint."""


def _read(path: Path, device) -> object:
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if path.is_dir():
        raise CheckpointError(f"{path}: is a directory, expected a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: the file is empty")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "Weights only load failed" in str(e):
            raise CheckpointError(
                f"{path}: refused: the file holds objects other than tensors and plain data "
                f"(it could run code when loaded)"
            ) from None
        raise CheckpointError(f"{path}: not a torch checkpoint ({first})") from None
    except (EOFError, RuntimeError, zipfile.BadZipFile, OSError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, UnicodeDecodeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "failed finding central directory" in msg or isinstance(e, EOFError):
            msg = "the file is truncated or corrupt"
        raise CheckpointError(f"{path}: cannot read checkpoint ({msg[:200]})") from None


def infer_config(state_dict: dict, path: Path | str = "<state dict>") -> ModelConfig:
    """The model config implied by a TransformerLens state dict's shapes (SPEC §2.4)."""

    def shape(key):
        if key not in state_dict:
            raise CheckpointError(f"{path}: missing key {key!r}; not a TransformerLens state dict of this model")
        t = state_dict[key]
        if not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{path}: {key!r} is a {type(t).__name__}, expected a tensor")
        return tuple(t.shape)

    d_vocab, d_model = shape("embed.W_E")
    n_ctx = shape("pos_embed.W_pos")[0]
    d_vocab_out = shape("unembed.W_U")[1]
    layers = sorted({int(k.split(".")[1]) for k in state_dict if k.startswith("blocks.") and k.split(".")[1].isdigit()})
    if layers != list(range(len(layers))) or not layers:
        raise CheckpointError(f"{path}: expected blocks 0..L-1, found {layers}")
    n_heads, _, d_head = shape("blocks.0.attn.W_Q")
    d_mlp = shape("blocks.0.mlp.W_in")[1]
    if d_vocab - d_vocab_out - 3 < 2:
        raise CheckpointError(
            f"{path}: vocabulary {d_vocab} and {d_vocab_out} output classes leave no room for variables"
        )
    mlp_layers = tuple(
        layer for layer in layers
        if bool(state_dict[f"blocks.{layer}.mlp.W_in"].abs().sum() > 0)
        or bool(shape(f"blocks.{layer}.mlp.W_out") and state_dict[f"blocks.{layer}.mlp.W_out"].abs().sum() > 0)
    )
    return ModelConfig(d_vocab=d_vocab, d_vocab_out=d_vocab_out, n_ctx=n_ctx, d_model=d_model, d_head=d_head,
                       n_heads=n_heads, d_mlp=d_mlp, n_layers=len(layers), mlp_layers=mlp_layers)


def _check_and_load(model: AssignAddTransformer, state_dict: dict, path, zero_keys=()) -> None:
    expected = model.state_dict()
    buffers = {k for k, _ in model.named_buffers()}
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    bad_zero = [k for k in zero_keys if k not in frozen or k in state_dict]
    if bad_zero:
        raise CheckpointError(f"{path}: zero_keys names {bad_zero[0]!r}, which is not a frozen zero tensor")
    state_dict = {**state_dict, **{k: torch.zeros_like(expected[k]) for k in zero_keys}}
    missing = [k for k in expected if k not in state_dict and k not in buffers]
    unexpected = [k for k in state_dict if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
        if unexpected:
            parts.append(f"unexpected {', '.join(unexpected[:3])}{' ...' if len(unexpected) > 3 else ''}")
        raise CheckpointError(f"{path}: state dict keys do not match the model: {'; '.join(parts)}")
    for k, t in state_dict.items():
        if not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{path}: {k!r} is a {type(t).__name__}, expected a tensor")
        if tuple(t.shape) != tuple(expected[k].shape):
            raise CheckpointError(
                f"{path}: {k!r} has shape {list(t.shape)}, expected {list(expected[k].shape)}"
            )
        # IGNORE is -inf by design (the attention mask's fill value): skip it in the finiteness check.
        if k.endswith("IGNORE") or t.dtype == torch.bool:
            continue
        if not t.is_floating_point():
            raise CheckpointError(f"{path}: {k!r} has dtype {t.dtype}, expected floating point")
        if not torch.isfinite(t).all():
            raise CheckpointError(f"{path}: {k!r} holds NaN or infinite values")
    sd = {k: (v.float() if v.is_floating_point() and not k.endswith("IGNORE") else v) for k, v in state_dict.items()}
    for k in buffers:
        sd.setdefault(k, expected[k])
    model.load_state_dict(sd, strict=True)


def load_checkpoint_full(path, device: str | torch.device = "cpu") -> tuple[AssignAddTransformer, dict]:
    """Load a checkpoint in either format: ``(model in eval mode, metadata)``.

    The metadata says which format it was (``"format"``: ``"transformer_lens"`` or ours) and holds
    our format's task, step and metrics where present.
    """
    path = Path(path)
    obj = _read(path, device)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors, found a {type(obj).__name__}")
    if obj.get("format") == FORMAT:
        sd = obj.get("state_dict")
        if not isinstance(sd, dict):
            raise CheckpointError(f"{path}: assignadd checkpoint without a state_dict")
        try:
            cfg = ModelConfig.from_dict(obj["model_config"])
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: bad model_config ({e})") from None
        zero_keys = obj.get("zero_keys") or []
        meta = {k: v for k, v in obj.items() if k != "state_dict"}
    elif "format" in obj and not isinstance(obj.get("format"), torch.Tensor):
        raise CheckpointError(f"{path}: unknown checkpoint format {obj.get('format')!r}, expected {FORMAT!r}")
    else:
        sd = obj
        if not all(isinstance(k, str) for k in sd):
            raise CheckpointError(f"{path}: expected a dict with string keys")
        cfg = infer_config(sd, path)
        meta = {"format": "transformer_lens", "model_config": cfg.to_dict()}
        zero_keys = []
    try:
        model = AssignAddTransformer(cfg)
    except (ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: cannot build a model from its config ({e})") from None
    _check_and_load(model, sd, path, zero_keys)
    model.to(device)
    model.eval()
    return model, meta


def load_checkpoint(path, device: str | torch.device = "cpu") -> AssignAddTransformer:
    """Load either checkpoint format of SPEC §2.4 and return the model in eval mode."""
    return load_checkpoint_full(path, device)[0]


def atomic_save(obj, path) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_checkpoint(model: AssignAddTransformer, path, *, task: dict | None = None, step: int | None = None,
                    metrics: dict | None = None, run: dict | None = None, drop_zero_frozen: bool = False) -> None:
    """Save in our format. ``drop_zero_frozen`` leaves out the all-zero frozen tensors (biases, the
    MLP of MLP-less layers) and the mask buffers, which loading restores; it makes series files smaller."""
    sd = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    if drop_zero_frozen:
        frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
        sd = {k: v for k, v in sd.items()
              if not (k in frozen and not v.any()) and not k.endswith((".mask", ".IGNORE"))}
    zero_keys = sorted(k for k in model.state_dict() if k not in sd and k not in dict(model.named_buffers()))
    obj = {"format": FORMAT, "state_dict": sd, "zero_keys": zero_keys, "model_config": model.cfg.to_dict(),
           "task": task, "step": step, "metrics": metrics or {}, "run": run or {}}
    atomic_save(obj, path)
