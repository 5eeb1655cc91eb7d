"""Files written whole or not at all, and the SHA-256 of a file: the one owner of each (issue "One owner
per operation"). Standard library only, so every layer (data, model, training, hypotheses, reports, the
tools) may import it.

- ``atomic_write(path, text_or_bytes)``: one file. Written to a temporary file beside ``path``, flushed to
  disk (``fsync``), then renamed over ``path``: a reader, or a run killed mid-way, sees the old file or the
  new one, never half of one. ``atomic_write_with(path, write)`` is the same for a writer that streams
  into a binary file object (``torch.save``).
- ``atomic_write_files(folder, {name: text_or_bytes})``: a set of files (a report), all written before any
  is moved in. A new folder appears whole (a staging folder renamed to it); in an existing one each file
  is replaced atomically and nothing else in it is touched. ``stage_folder`` / ``commit_folder`` are the
  two halves, for a caller that writes its files one at a time.
- ``sha256_file(path)`` (streamed, for checkpoints of any size) and ``sha256_bytes(data)``.
- ``checkpoint_file_problem(path)``: why a path cannot be a checkpoint, from the file system and the file's
  first bytes alone, for the commands to answer bad input before they import torch.

Text is written as UTF-8 with ``\\n`` line ends, whatever the platform or locale. Files and folders get the
permissions an ordinary ``open(path, "w")`` / ``mkdir`` would (0644 / 0755 under umask 022), never the
private 0600 of ``tempfile.mkstemp``: colleagues on a shared machine can read a run's checkpoints and
reports. (They are created with mode 0666 / 0777 and the kernel applies the umask; the umask is never
changed, not even for a moment, so this is safe with other threads running.)
"""

from __future__ import annotations

import hashlib
import os
import secrets
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable, Mapping

CHUNK = 1 << 20  # bytes read at a time when hashing a file


def _unique(parent: Path, prefix: str, suffix: str, create: Callable[[str], object]):
    """``create(name)`` for a fresh hidden name ``{prefix}{random}{suffix}`` in ``parent``; returns
    ``(what create returned, the path)``."""
    for _ in range(100):
        candidate = parent / f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            return create(str(candidate)), candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent}: no unused temporary name {prefix}*{suffix}")


def _encode(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else bytes(content)


def atomic_write_with(path, write: Callable[[BinaryIO], object]) -> Path:
    """``write(fh)`` into a temporary file beside ``path`` (opened ``wb``), then ``fsync`` and rename it
    over ``path``; on any error the temporary file is removed and ``path`` is left as it was. Creates the
    parent folders. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd, tmp = _unique(path.parent, f".{path.name}.", ".tmp", lambda name: os.open(name, flags, 0o666))
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write(path, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8, or bytes) to ``path`` whole or not at all (see the module
    docstring). Returns ``path``."""
    data = _encode(content)
    return atomic_write_with(path, lambda fh: fh.write(data))


def stage_folder(out) -> Path:
    """A new hidden folder to write ``out``'s files into, on the same file system as ``out``: inside
    ``out`` when it already exists (``commit_folder`` then replaces its files one by one), else beside it
    (``commit_folder`` renames it to ``out``). Creates ``out``'s parent folders. Raises ``OSError`` when
    the place cannot be written."""
    out = Path(out)
    parent = out if out.is_dir() else out.parent
    parent.mkdir(parents=True, exist_ok=True)
    return _unique(parent, f".{out.name}.", ".tmp", lambda name: os.mkdir(name, 0o777))[1]


def commit_folder(staging, out) -> Path:
    """Move the files of ``staging`` (``stage_folder``) into ``out``, each one flushed to disk first.
    ``out`` absent: ``staging`` is renamed to it, so it appears with every file. ``out`` a folder: each
    file replaces its namesake atomically (a subfolder's files theirs, in the subfolder); other files in
    ``out`` stay; ``staging`` is removed. Returns ``out``."""
    staging, out = Path(staging), Path(out)
    for path in sorted(staging.rglob("*")):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    if not out.exists():
        os.rename(staging, out)
        return out
    for name in sorted(os.listdir(staging)):  # a folder among them is committed the same way, into its namesake
        if (staging / name).is_dir() and (out / name).is_dir():
            commit_folder(staging / name, out / name)
        else:
            os.replace(staging / name, out / name)
    staging.rmdir()
    return out


def atomic_write_files(out, files: Mapping[str, str | bytes]) -> Path:
    """Write every file of ``files`` (name in ``out`` -> text or bytes) before any of them is moved into
    ``out`` (see ``stage_folder`` and ``commit_folder``): a reader never sees a report half old, half new
    or half written. On an error nothing is moved in and the staging folder is removed. Returns ``out``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out}: exists and is not a folder")
    staging = stage_folder(out)
    try:
        for name, content in files.items():  # a name may hold folders: "seed0/report.json"
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(_encode(content))
        return commit_folder(staging, out)
    finally:
        if staging.exists():
            for leftover in staging.iterdir():
                leftover.unlink(missing_ok=True)
            staging.rmdir()


def sha256_bytes(data: bytes) -> str:
    """The SHA-256 of ``data``, as lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path) -> str:
    """The SHA-256 of the file at ``path``, as lowercase hex, read ``CHUNK`` bytes at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


# What a file that torch.save did not write is, by its first bytes (checked in order).
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%PDF", "a PDF document"),
    (b"\x1f\x8b", "a gzip archive (unpack it first)"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (e.g. a Keras model)"),
    (b"GGUF", "a GGUF model file"),
    (b"\x7fELF", "an executable"),
)
HEAD_BYTES = 512  # how much of a file ``checkpoint_file_problem`` reads


def _printable(head: bytes) -> bool:
    """``head`` is printable UTF-8 text (the read may end inside a multi-byte character)."""
    for cut in range(4):
        try:
            text = head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return all(c.isprintable() or c in "\n\r\t" for c in text)
    return False


def not_a_torch_file(path, head: bytes) -> str | None:
    """What the file at ``path`` is, when its first bytes ``head`` show it cannot be a ``torch.save`` file
    (a zip archive holding ``data.pkl``, or a pickle): "a PNG image", "a text file, not a torch.save
    file", ...; None when it may be one."""
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as zf:
                names = zf.namelist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return None  # a truncated torch.save file looks like this too: loading it reports it
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return None
        if any(n.endswith(".npy") for n in names):
            return "a NumPy .npz archive, not a torch.save file"
        return "a zip archive without data.pkl, not a torch.save file"
    if head[:1] == b"\x80":
        return None  # a pickle: a legacy torch.save file, or something the weights-only loader refuses
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if len(head) >= 10 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < 100_000_000:
        return (
            "a safetensors file (load it with safetensors.torch.load_file and save the dict with "
            "torch.save to use it here)"
        )
    if _printable(head):
        text = head.decode("utf-8", errors="ignore")
        kind = "a JSON file" if text.lstrip()[:1] in ("{", "[") else "a text file"
        return f"{kind}, not a torch.save file"
    return "neither a zip archive nor a pickle, so not a torch.save file"


def checkpoint_file_problem(path) -> str | None:
    """Why ``path`` cannot be a checkpoint, judged from the file system and its first ``HEAD_BYTES`` bytes:
    one line naming the path, the same that ``model.checkpoint.read_checkpoint_file`` raises for it
    (``<path>: no such file``, ``<path>: is a directory, expected a checkpoint file``, ``<path>: the file
    is empty``, ``<path>: cannot read (<reason>)``, ``<path>: not a checkpoint: <what it is>``). None when
    it may be a ``torch.save`` file; loading it then checks everything else."""
    path = Path(path)
    try:
        if not path.exists():
            return f"{path}: no such file"
        if path.is_dir():
            return f"{path}: is a directory, expected a checkpoint file"
        if path.stat().st_size == 0:
            return f"{path}: the file is empty"
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as e:
        return f"{path}: cannot read ({e.strerror or e})"
    what = not_a_torch_file(path, head)
    return None if what is None else f"{path}: not a checkpoint: {what}"
