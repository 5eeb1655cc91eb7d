"""Loading and saving checkpoints in the two formats of SPEC §2.4.

1. A bare TransformerLens 2.x state dict (the paper's authors' format): no config, so it is inferred
   from the shapes.
2. Our own: ``{"format": "assignadd.checkpoint/1", "state_dict", "model_config", "task", "step",
   "metrics", "run"}``.

Both are read with ``torch.load(weights_only=True)``: a file that would run code is refused, never run.
Every problem raises ``CheckpointError`` with one line naming the file and what was wrong; a file that
is not a ``torch.save`` file at all (text, an image, a NumPy array, safetensors, ...) is named for what
it is.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import pickletools
import re
import struct
import warnings
import zipfile
from pathlib import Path

import torch

from ..data.tokens import N_SPECIAL
from ..fileio import atomic_write_with, not_a_torch_file
from .transformer import AssignAddTransformer, ModelConfig

FORMAT = "assignadd.checkpoint/1"


class CheckpointError(ValueError):
    """A file that is not a loadable assignadd or TransformerLens checkpoint."""


def _downgrade_pickle(data: bytes) -> bytes:
    """The same pickle stream written with the protocol-2 opcodes torch's weights-only unpickler reads.

    TransformerLens 2.x runs saved with pickle protocol 4 (SPEC §2.4), and that unpickler refuses
    protocol 4's FRAME, MEMOIZE, SHORT_BINUNICODE and STACK_GLOBAL (pytorch/pytorch#118092). This only
    parses the stream (``pickletools.genops`` runs nothing); the result still goes through
    ``torch.load(weights_only=True)``, which decides what is allowed. Other opcodes pass unchanged.
    """
    ops = list(pickletools.genops(data))
    out: list[tuple[bytes, str | None]] = []  # (encoded op, string it pushes or None); PUTs hold None
    puts: list[int | None] = []  # memo index of each PUT in `out`, None for other ops
    memo_keys: set[int] = set()
    memo_str: dict[int, str] = {}  # memo entries that hold a string
    dropped: dict[int, str] = {}  # memo entries whose PUT went with a STACK_GLOBAL operand

    def emit(raw: bytes, pushed: str | None = None, put: int | None = None):
        out.append((raw, pushed))
        puts.append(put)

    for i, (op, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        name = op.name
        if name == "PROTO":
            emit(b"\x80\x02")
        elif name == "FRAME":
            continue
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"):
            enc = arg.encode("utf-8", "surrogatepass")
            emit(b"X" + struct.pack("<I", len(enc)) + enc, pushed=arg)
        elif name in ("MEMOIZE", "BINPUT", "LONG_BINPUT"):
            idx = len(memo_keys) if name == "MEMOIZE" else arg
            memo_keys.add(idx)
            if out and out[-1][1] is not None:
                memo_str[idx] = out[-1][1]
            else:
                memo_str.pop(idx, None)
            emit(b"r" + struct.pack("<I", idx), put=idx)
        elif name in ("BINGET", "LONG_BINGET"):
            if arg in dropped:
                enc = dropped[arg].encode("utf-8", "surrogatepass")
                emit(b"X" + struct.pack("<I", len(enc)) + enc, pushed=dropped[arg])
            else:
                emit(b"j" + struct.pack("<I", arg), pushed=memo_str.get(arg))
        elif name == "STACK_GLOBAL":
            names = []
            for _ in range(2):  # the two operands: string pushes, each maybe followed by PUTs
                put_idx = []
                while puts and puts[-1] is not None:
                    put_idx.append(puts.pop())
                    out.pop()
                if not out or out[-1][1] is None:
                    raise pickle.UnpicklingError("STACK_GLOBAL whose operands are not plain strings")
                value = out.pop()[1]
                puts.pop()
                dropped.update({k: value for k in put_idx})
                names.append(value)
            qualname, module = names
            if "\n" in module or "\n" in qualname:
                raise pickle.UnpicklingError("STACK_GLOBAL with a newline in its name")
            emit(b"c" + module.encode("utf-8") + b"\n" + qualname.encode("utf-8") + b"\n")
        else:
            emit(data[pos:end])
    return b"".join(raw for raw, _ in out)


def _pickle_protocol(path: Path) -> int | None:
    """The pickle protocol of a zip-format torch file's ``data.pkl``, or None for anything else."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
            if len(names) != 1:
                return None
            with zf.open(names[0]) as fh:
                head = fh.read(2)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None
    return head[1] if len(head) == 2 and head[0] == 0x80 else None


def _load_downgraded(path: Path, device) -> object:
    """``torch.load(weights_only=True)`` of a protocol 3-5 file, its pickle rewritten in memory."""
    buf = io.BytesIO()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "data.pkl" or info.filename.endswith("/data.pkl"):
                data = _downgrade_pickle(data)
            dst.writestr(info.filename, data)
    buf.seek(0)
    return torch.load(buf, map_location=device, weights_only=True)


def read_checkpoint_file(path, device: str | torch.device = "cpu") -> object:
    """The object a checkpoint file holds, read weights only (TransformerLens' protocol-4 files without
    torch's protocol warning), for ``load_checkpoint_full`` and for a caller that needs its metadata
    (``step``, ``task``) without building a model. Raises ``CheckpointError``."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if path.is_dir():
        raise CheckpointError(f"{path}: is a directory, expected a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: the file is empty")
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read ({e.strerror or e})") from None
    what = not_a_torch_file(path, head)
    if what is not None:
        raise CheckpointError(f"{path}: not a checkpoint: {what}")
    try:
        if (_pickle_protocol(path) or 2) > 2:
            return _load_downgraded(path, device)
        with warnings.catch_warnings():
            # A legacy (non-zip) file pickled with protocol 3-5: torch warns that its weights-only
            # unpickler might not read it; it does, or says why not, which the handlers below report.
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "Weights only load failed" in str(e):
            if head[:1] == b"\x80" and len(head) > 1 and head[1] > 2:
                # Not a zip file, and its protocol's opcodes stop the safe unpickler before it sees any object.
                raise CheckpointError(
                    f"{path}: refused: a plain pickle (protocol {head[1]}), not a zip-format torch.save file; "
                    f"only tensors and plain data are loaded, never code (re-save a checkpoint with torch.save)"
                ) from None
            raise CheckpointError(
                f"{path}: refused: the file holds objects other than tensors and plain data "
                f"(it could run code when loaded)"
            ) from None
        raise CheckpointError(f"{path}: not a torch checkpoint ({first})") from None
    except (
        EOFError,
        RuntimeError,
        zipfile.BadZipFile,
        OSError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        UnicodeDecodeError,
    ) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "failed finding central directory" in msg or isinstance(e, EOFError):
            msg = "the file is truncated or corrupt"
        raise CheckpointError(f"{path}: cannot read checkpoint ({msg[:200]})") from None


def infer_config(state_dict: dict, path: Path | str = "<state dict>") -> ModelConfig:
    """The model config implied by a TransformerLens state dict's shapes (SPEC §2.4)."""

    def shape(key, ndim):
        if key not in state_dict:
            raise CheckpointError(f"{path}: missing key {key!r}; not a TransformerLens state dict of this model")
        t = state_dict[key]
        if not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{path}: {key!r} is a {type(t).__name__}, expected a tensor")
        if t.dim() != ndim:
            raise CheckpointError(f"{path}: {key!r} has shape {list(t.shape)}, expected {ndim} dimensions")
        return tuple(t.shape)

    def nonzero(key, ndim):
        shape(key, ndim)
        return bool((state_dict[key] != 0).any())  # NaN counts as nonzero; the finiteness check refuses it

    d_vocab, d_model = shape("embed.W_E", 2)
    n_ctx = shape("pos_embed.W_pos", 2)[0]
    d_vocab_out = shape("unembed.W_U", 2)[1]
    layers = sorted({int(k.split(".")[1]) for k in state_dict if k.startswith("blocks.") and k.split(".")[1].isdigit()})
    if layers != list(range(len(layers))) or not layers:
        raise CheckpointError(f"{path}: expected blocks 0..L-1, found {layers}")
    n_heads, _, d_head = shape("blocks.0.attn.W_Q", 3)
    d_mlp = shape("blocks.0.mlp.W_in", 2)[1]
    if d_vocab - d_vocab_out - N_SPECIAL < 2:
        raise CheckpointError(
            f"{path}: vocabulary {d_vocab} and {d_vocab_out} output classes leave no room for variables"
        )
    mlp_layers = tuple(
        layer for layer in layers if nonzero(f"blocks.{layer}.mlp.W_in", 2) or nonzero(f"blocks.{layer}.mlp.W_out", 2)
    )
    # A TransformerLens "LN" model holds ln_final.w, and ln1/ln2 weights in every block: the key check
    # of loading then names any that lack (and a stray LayerNorm key in a model without one).
    layernorm = "ln_final.w" in state_dict
    try:
        return ModelConfig(
            d_vocab=d_vocab,
            d_vocab_out=d_vocab_out,
            n_ctx=n_ctx,
            d_model=d_model,
            d_head=d_head,
            n_heads=n_heads,
            d_mlp=d_mlp,
            n_layers=len(layers),
            mlp_layers=mlp_layers,
            layernorm=layernorm,
        )
    except ValueError as e:
        raise CheckpointError(f"{path}: its shapes make no model ({e})") from None


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
    parts = [
        f"{what} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
        for what, keys in (("missing", missing), ("unexpected", unexpected))
        if keys
    ]
    if parts:
        raise CheckpointError(f"{path}: state dict keys do not match the model: {'; '.join(parts)}")
    for k, t in state_dict.items():
        if not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{path}: {k!r} is a {type(t).__name__}, expected a tensor")
        if tuple(t.shape) != tuple(expected[k].shape):
            raise CheckpointError(f"{path}: {k!r} has shape {list(t.shape)}, expected {list(expected[k].shape)}")
        # Buffers are fixed by the architecture: the causal mask, and IGNORE = -inf by design (the mask's
        # fill value), which the finiteness check below must skip.
        if k in buffers:
            want = expected[k].to(t.device)
            is_mask = want.dtype == torch.bool
            right_kind = t.dtype == torch.bool if is_mask else t.is_floating_point()
            if not right_kind or not torch.equal(t.to(want.dtype), want):
                what = "the causal mask" if is_mask else "-inf"
                raise CheckpointError(f"{path}: buffer {k!r} does not hold {what} as the architecture fixes")
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
    obj = read_checkpoint_file(path, device)
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
        meta = {"format": "transformer_lens", "model_config": cfg.to_dict(), "step": step_from_name(path)}
        if meta["step"] is not None:
            meta["step_source"] = "file name"
        zero_keys = []
    try:
        model = AssignAddTransformer(cfg)
    except (ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: cannot build a model from its config ({e})") from None
    _check_and_load(model, sd, path, zero_keys)
    model.to(device)
    model.eval()
    return model, meta


_STEP_IN_NAME = re.compile(r"(?:^|[^a-z])step[_-]?(\d+)$", re.IGNORECASE)


def step_from_name(path) -> int | None:
    """The training step a file name states (``checkpoint_step_39901.pth``, ``step_000100.pt``), or None.

    The authors' bare state dicts carry no metadata: their names are the only record of the step."""
    m = _STEP_IN_NAME.search(Path(path).stem)
    return int(m.group(1)) if m else None


def load_checkpoint(path, device: str | torch.device = "cpu") -> AssignAddTransformer:
    """Load either checkpoint format of SPEC §2.4 and return the model in eval mode."""
    return load_checkpoint_full(path, device)[0]


def state_sha256(model: AssignAddTransformer) -> str:
    """SHA-256 of the model's weights themselves, whatever file they came from: every parameter and buffer
    in ``state_dict`` order, each as its name, dtype, shape and little-endian bytes. Two files with the
    same digest hold the same model (e.g. one saved with ``drop_zero_frozen`` and one without)."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def atomic_save(obj, path) -> None:
    """``torch.save`` of ``obj`` to ``path``, whole or not at all, readable by others as the umask allows
    (``fileio.atomic_write_with``). Saved through a file object, so the zip's top folder is torch's fixed
    ``archive/`` rather than a name taken from the temporary file: the same object gives the same bytes."""
    atomic_write_with(path, lambda fh: torch.save(obj, fh))


def save_checkpoint(
    model: AssignAddTransformer,
    path,
    *,
    task: dict | None = None,
    step: int | None = None,
    metrics: dict | None = None,
    run: dict | None = None,
    drop_zero_frozen: bool = False,
) -> None:
    """Save in our format. ``drop_zero_frozen`` leaves out the all-zero frozen tensors (biases, the
    MLP of MLP-less layers) and the mask buffers, which loading restores; it makes series files smaller."""
    sd = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    if drop_zero_frozen:
        frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
        sd = {k: v for k, v in sd.items() if not (k in frozen and not v.any()) and not k.endswith((".mask", ".IGNORE"))}
    zero_keys = sorted(k for k in model.state_dict() if k not in sd and k not in dict(model.named_buffers()))
    obj = {
        "format": FORMAT,
        "state_dict": sd,
        "zero_keys": zero_keys,
        "model_config": model.cfg.to_dict(),
        "task": task,
        "step": step,
        "metrics": metrics or {},
        "run": run or {},
    }
    atomic_save(obj, path)
