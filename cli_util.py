"""What the command-line tools share: the one-line answer to bad input, their argument parser, and the
checks of the paths they are given.

Standard library only (with ``fileio``, itself standard library only): every command parses its
arguments and checks its paths with these before it imports torch or TransformerLens, so bad input or
usage is answered at once, as one line on stderr with exit status 2 (docs/errors.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from .fileio import atomic_write_files, checkpoint_file_problem

# A run's final checkpoint, by its file name: ours (assignadd-train) and the paper's authors'.
FINAL_NAMES = ("final.pt", "model_state_dict.pth")


def exit_bad_input(message: str) -> None:
    """One clear line on stderr and exit code 2: the contract for bad input or usage. A message that spans
    lines (an exception's text) is joined into one."""
    line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"error: {line}", file=sys.stderr)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    """The argument parser of every assignadd command. A usage error (an unknown option, a missing
    argument, a value of the wrong type) is one line on stderr, ``error: <what is wrong> (see <prog>
    --help)``, with exit status 2, as any other bad input; ``--help`` prints the full help and exits 0."""

    def error(self, message):
        exit_bad_input(f"{message} (see {self.prog} --help)")


def checkpoint_arg_problem(path) -> str | None:
    """Why ``path``, given as a checkpoint, cannot be one (``fileio.checkpoint_file_problem``), or None.
    For a training run's folder (one holding a final checkpoint) the line names that file, so the fix is
    in the message; the folder itself is not read as a checkpoint."""
    path = Path(path)
    problem = checkpoint_file_problem(path)
    if problem is not None and path.is_dir():
        final = next((path / name for name in FINAL_NAMES if (path / name).is_file()), None)
        if final is not None:
            return f"{path}: is a directory, expected a checkpoint file; did you mean {final}?"
    return problem


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def folder_arg_problem(path) -> str | None:
    """Why ``path`` cannot be made, or used, as an output folder (a run folder, a sweep folder), or None:
    it is a file; a file stands where one of its parent folders should be; or the nearest existing
    folder above it cannot be written. Creates nothing."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{path}: exists and is not a folder"
    anchor = _nearest_existing(path)
    if not anchor.is_dir():
        return f"{path}: cannot create it ({anchor} is not a folder)"
    if not os.access(anchor, os.W_OK | os.X_OK):
        return f"{path}: cannot write there ({anchor} is not writable)"
    return None


def check_writable(path: Path, flag: str, want_dir: bool) -> None:
    """Exit 2 when the output ``path`` of option ``flag`` (a folder when ``want_dir``, else a file)
    cannot be written, creating nothing: probe the nearest existing folder above it."""
    path = Path(path)
    if path.exists() and path.is_dir() != want_dir:
        exit_bad_input(
            f"{flag} {path}: "
            + ("exists and is not a directory" if want_dir else "is a directory, expected a file path")
        )
    anchor = _nearest_existing(path.parent)
    if not anchor.is_dir():
        exit_bad_input(f"{flag} {path}: cannot write there ({anchor} is not a directory)")
    try:
        os.rmdir(tempfile.mkdtemp(dir=anchor, prefix=".assignadd-probe."))
    except OSError as e:
        exit_bad_input(f"{flag} {path}: cannot write there ({e.strerror or e})")


class Progress:
    """Progress of a command's units of work on stderr: on a terminal a bar that clears itself; in a log
    (stderr not a terminal) one finished line per unit, ``claim 2/7 identity_qk: pass (1.2 s)``, so nothing
    is left without its newline for a table on stdout to run into; nothing when ``quiet``."""

    def __init__(self, total: int, what: str = "claim", quiet: bool = False):
        from tqdm import tqdm

        self.total, self.what, self.quiet = total, what, quiet
        self.interactive = not quiet and sys.stderr.isatty()
        self.bar = tqdm(
            total=total, desc=f"{what}s", unit=what, file=sys.stderr, disable=not self.interactive, leave=False
        )

    def done(self, i: int, name: str, outcome: str, seconds: float) -> None:
        self.bar.update(1)
        self.bar.set_postfix_str(name)
        if not self.quiet and not self.interactive:
            print(f"{self.what} {i}/{self.total} {name}: {outcome} ({seconds:.1f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()


def check_at_least(*checks: tuple[str, int | None, int, str]) -> None:
    """Exit 2 on the first ``(flag, value, least, what)`` whose value (when given) is below ``least``:
    ``error: FLAG must be WHAT, got VALUE``."""
    for flag, value, least, what in checks:
        if value is not None and value < least:
            exit_bad_input(f"{flag} must be {what}, got {value}")


def read_json(path, flag: str):
    """The JSON document in the file ``path`` given to ``flag``; exit 2 when it is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        exit_bad_input(f"{flag} {path}: no such file")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        exit_bad_input(f"{flag} {path}: not a JSON document ({type(e).__name__}: {e})")


def write_folder_or_exit(out, files: dict, flag: str = "--out") -> None:
    """``fileio.atomic_write_files``: every file into the folder ``out`` whole, or none of them; a folder that
    cannot be written there is bad input (one line, exit 2)."""
    try:
        atomic_write_files(out, files)
    except OSError as e:
        exit_bad_input(f"{flag} {out}: cannot write there ({e.strerror or e})")
