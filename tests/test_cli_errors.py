"""Bad input to every command, as a user meets it: one line on stderr, exit status 2, nothing written.

Each command runs as its own process (``python -m assignadd.<module>``), as from a shell, with a bad
flag and with each kind of bad path: missing, a folder, an empty file, a text file. Where a command's
path is a folder it creates (``assignadd-train RUN_DIR``, ``assignadd-sweep --out``) a missing path or a
folder is good input; there the missing path is one under a file, and the folder one that holds
something else. How fast these are answered is measured by ``bench/cli_startup.py``, not here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assignadd import reference_series

MODULES = {
    "assignadd-verify": "assignadd.reports.verify_cli",
    "assignadd-mutants": "assignadd.reports.mutants_cli",
    "assignadd-report": "assignadd.reports.report_cli",
    "assignadd-train": "assignadd.training.train_cli",
    "assignadd-sweep": "assignadd.training.sweep_cli",
}
# A few steps at most should a check ever let a case through to training (the test then fails on it).
TRAIN = ["--steps", "1", "--eval-size", "8", "--precision", "fp32", "--quiet"]
SWEEP = ["--param", "f", "--values", "0.5", *TRAIN]

# (command, case, argv with {path} and {out}, what the line says). {out} is where the command would write.
CASES = [
    ("assignadd-verify", "flag", ["--bogus", "--out", "{out}"], "unrecognized arguments: --bogus"),
    ("assignadd-verify", "missing", ["{path}", "--out", "{out}"], "missing.pt: no such file"),
    ("assignadd-verify", "folder", ["{path}", "--out", "{out}"], "folder: is a directory, expected a checkpoint file"),
    ("assignadd-verify", "empty", ["{path}", "--out", "{out}"], "empty.pt: the file is empty"),
    ("assignadd-verify", "text", ["{path}", "--out", "{out}"], "notes.txt: not a checkpoint: a text file"),
    ("assignadd-mutants", "flag", ["--bogus", "--json", "{out}/m.json"], "unrecognized arguments: --bogus"),
    ("assignadd-mutants", "missing", ["{path}", "--json", "{out}/m.json"], "missing.pt: no such file"),
    ("assignadd-mutants", "folder", ["{path}", "--md", "{out}/m.md"], "is a directory, expected a checkpoint file"),
    ("assignadd-mutants", "empty", ["{path}", "--json", "{out}/m.json"], "empty.pt: the file is empty"),
    ("assignadd-mutants", "text", ["{path}", "--html", "{out}/m.html"], "notes.txt: not a checkpoint: a text file"),
    ("assignadd-report", "flag", ["{path}", "--bogus", "--out", "{out}"], "unrecognized arguments: --bogus"),
    ("assignadd-report", "missing", ["{path}", "--out", "{out}"], "missing.pt: no such folder"),
    ("assignadd-report", "folder", ["{path}", "--out", "{out}"], "folder: no checkpoints"),
    ("assignadd-report", "empty", ["{path}", "--out", "{out}"], "empty.pt: not a folder"),
    ("assignadd-report", "text", ["{path}", "--out", "{out}"], "notes.txt: not a folder"),
    ("assignadd-train", "flag", ["{out}", "--bogus", *TRAIN], "unrecognized arguments: --bogus"),
    ("assignadd-train", "missing", ["{path}", *TRAIN], "cannot create it (notes.txt is not a folder)"),
    ("assignadd-train", "folder", ["{path}", *TRAIN], "run.json: not valid JSON"),
    ("assignadd-train", "empty", ["{path}", *TRAIN], "empty.pt: exists and is not a folder"),
    ("assignadd-train", "text", ["{path}", *TRAIN], "notes.txt: exists and is not a folder"),
    ("assignadd-sweep", "flag", [*SWEEP, "--bogus", "--out", "{out}"], "unrecognized arguments: --bogus"),
    ("assignadd-sweep", "missing", [*SWEEP, "--out", "{path}"], "cannot create it (notes.txt is not a folder)"),
    ("assignadd-sweep", "folder", [*SWEEP, "--out", "{path}"], "holds no sweep.json"),
    ("assignadd-sweep", "empty", [*SWEEP, "--out", "{path}"], "empty.pt: exists and is not a folder"),
    ("assignadd-sweep", "text", [*SWEEP, "--out", "{path}"], "notes.txt: exists and is not a folder"),
]


def bad_inputs(root: Path) -> dict[tuple[str, str], str]:
    """Make the bad paths in ``root``; returns (command, case) -> the path to give, relative to ``root``."""
    (root / "empty.pt").write_bytes(b"")
    (root / "notes.txt").write_text("a note, not a checkpoint\n")
    (root / "folder").mkdir()
    (root / "folder" / "readme.txt").write_text("nothing to read here\n")
    (root / "run").mkdir()
    (root / "run" / "run.json").write_text("not JSON\n")
    given = {"missing": "missing.pt", "folder": "folder", "empty": "empty.pt", "text": "notes.txt", "flag": "folder"}
    paths = {(command, case): given[case] for command, case, _, _ in CASES}
    for command in ("assignadd-train", "assignadd-sweep"):
        paths[command, "missing"] = str(Path("notes.txt") / "run")  # a path that cannot be created
    paths["assignadd-train", "folder"] = "run"
    return paths


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root``, with its size and modification time."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.stat()
            found[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return found


def run_command(command: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", MODULES[command], *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def assert_one_line(p: subprocess.CompletedProcess, says: str) -> str:
    """Exit 2, nothing on stdout, exactly one non-empty line on stderr that starts ``error:`` and holds
    ``says``; returns the line."""
    lines = p.stderr.splitlines()
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert len(lines) == 1 and lines[0].strip(), p.stderr
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command, case, argv, says", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, command, case, argv, says):
    path = bad_inputs(tmp_path)[command, case]
    out = "out"
    before = snapshot(tmp_path)
    p = run_command(command, [a.format(path=path, out=out) for a in argv], tmp_path)
    line = assert_one_line(p, says)
    if case == "flag":
        assert line.endswith(f"(see {command} --help)")
    assert not (tmp_path / out).exists()
    assert snapshot(tmp_path) == before  # nothing written, not even a staging folder


@pytest.mark.parametrize("command", MODULES)
def test_help_is_the_full_help_and_exit_0(command, tmp_path):
    p = run_command(command, ["--help"], tmp_path)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.startswith(f"usage: {command}") and "options:" in p.stdout


@pytest.mark.parametrize("command", ["assignadd-verify", "assignadd-mutants"])
@pytest.mark.parametrize("final", ["final.pt", "model_state_dict.pth"])
def test_a_run_folder_given_as_a_checkpoint_names_its_final_checkpoint(tmp_path, command, final):
    run = tmp_path / "run1"
    run.mkdir()
    (run / final).write_bytes(b"\x80\x02}q\x00.")  # its content is not read: the folder is refused as it is
    p = run_command(command, ["run1"], tmp_path)
    line = assert_one_line(p, "did you mean")
    final_path = Path("run1") / final
    assert line == f"error: run1: is a directory, expected a checkpoint file; did you mean {final_path}?"


def test_train_legend_explains_the_progress_labels(tmp_path):
    p = run_command("assignadd-train", ["--help"], tmp_path)
    for label, pool in (
        ("0varh", "0var_heldout_pair"),
        ("1varh", "1var_heldout_pair"),
        ("2varh", "2var_heldout_pair"),
        ("2varr", "2var_restricted_2"),
    ):
        assert any(label in line and pool in line for line in p.stdout.splitlines()), (label, p.stdout)


def test_report_names_the_page_it_wrote_by_its_absolute_path(tmp_path, monkeypatch, capsys):
    from assignadd.reports.report_cli import main as report_main

    folder = reference_series()[0].parent
    monkeypatch.chdir(tmp_path)
    code = report_main([str(folder), "--out", "pages", "--every", "1000", "--n", "10", "--claims", "0"])
    assert code in (0, 1)
    page = (tmp_path / "pages" / "series.html").resolve()
    assert page.is_file()
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(f"-> {page}"), first


def _files_that_are_not_checkpoints(root: Path) -> list[Path]:
    import gzip
    import io
    import zipfile

    import numpy as np

    made = {
        "notes.txt": b"a note\n",
        "doc.json": b'{"a": 1}',
        "image.png": b"\x89PNG\r\n\x1a\n" + bytes(40),
        "archive.gz": gzip.compress(b"data"),
        "weights.safetensors": (20).to_bytes(8, "little") + b'{"__metadata__":{}}',
        "noise.bin": bytes(range(7, 200)),
        "empty.pt": b"",
    }
    buf = io.BytesIO()
    np.savez(buf, a=np.zeros(3))
    made["arrays.npz"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "no pickle")
    made["plain.zip"] = buf.getvalue()
    for name, data in made.items():
        (root / name).write_bytes(data)
    (root / "folder").mkdir()
    return [root / name for name in made] + [root / "folder", root / "missing.pt"]


def test_the_light_check_says_what_loading_says_for_every_file_it_refuses(tmp_path):
    from assignadd.fileio import checkpoint_file_problem
    from assignadd.model.checkpoint import CheckpointError, read_checkpoint_file

    for path in _files_that_are_not_checkpoints(tmp_path):
        with pytest.raises(CheckpointError) as e:
            read_checkpoint_file(path)
        assert checkpoint_file_problem(path) == str(e.value)


def test_the_light_check_passes_a_checkpoint_and_leaves_a_truncated_one_to_loading(tmp_path):
    from assignadd import reference_checkpoint
    from assignadd.fileio import checkpoint_file_problem
    from assignadd.model.checkpoint import CheckpointError, read_checkpoint_file

    assert checkpoint_file_problem(reference_checkpoint()) is None
    cut = tmp_path / "cut.pt"
    cut.write_bytes(reference_checkpoint().read_bytes()[:4000])
    assert checkpoint_file_problem(cut) is None
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        read_checkpoint_file(cut)
    p = run_command("assignadd-verify", [str(cut), "--out", "out"], tmp_path)
    assert_one_line(p, "cut.pt: cannot read checkpoint")
    assert not (tmp_path / "out").exists()
