"""A new user's first hour: install, --help, typing a sequence, loading the authors' checkpoints, sharing
files, reading the docs. Each test is one thing that used to get in the way."""

from __future__ import annotations

import ast
import json
import os
import pickle
import re
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import assignadd
from assignadd import AssignAddTransformer, parse, render, to_tokens
from assignadd.data import ParseError
from assignadd.model import CheckpointError, load_checkpoint, load_checkpoint_full, save_checkpoint
from assignadd.reports.verify_cli import main as verify_main

from .test_verify_cli import PASS, _FakePass

ROOT = Path(assignadd.__file__).resolve().parent
SPEC_EXAMPLE = "PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 ="


# ----- typing a sequence ----------------------------------------------------------------------------
def test_a_short_sequence_is_a_batch_of_one_with_the_pads_in_front():
    tokens = to_tokens("a=3 b=4 + b 5 =")
    assert tokens.shape == (1, 16) and tokens.dtype == torch.long
    assert render(tokens) == ["PAD PAD PAD PAD PAD PAD PAD PAD a 3 b 4 + b 5 ="]
    assert torch.equal(to_tokens("a 3 b 4 + b 5 ="), tokens)  # 'a=3' and 'a 3' are the same assignment
    assert torch.equal(parse("+ 1 2 ="), parse("PAD " * 12 + "+ 1 2 ="))


def test_a_list_of_texts_is_a_batch_and_renders_back_to_texts():
    texts = ["a=3 b=4 + b 5 =", SPEC_EXAMPLE, "+ 7 8="]
    batch = to_tokens(texts)
    assert batch.shape == (3, 16)
    assert render(batch) == [
        "PAD PAD PAD PAD PAD PAD PAD PAD a 3 b 4 + b 5 =",
        SPEC_EXAMPLE,
        "PAD PAD PAD PAD PAD PAD PAD PAD PAD PAD PAD PAD + 7 8 =",
    ]
    assert render(batch[1]) == SPEC_EXAMPLE  # one sequence: one string


def test_the_model_takes_text_through_to_tokens_and_gives_it_back():
    model = AssignAddTransformer(seed=0).eval()
    tokens = model.to_tokens(["a=3 b=4 + b 5 =", "+ 1 2 ="])
    assert model(tokens).shape == (2, 16, 59)
    assert model.to_str_tokens("a=3 + a 5 =")[-6:] == ["a", "3", "+", "a", "5", "="]
    assert model.to_str_tokens(tokens)[1][-4:] == ["+", "1", "2", "="]
    assert model.to_string(tokens[0]) == "PAD PAD PAD PAD PAD PAD PAD PAD a 3 b 4 + b 5 ="
    assert model.to_single_token("=") == 60
    with pytest.raises(ValueError, match="no BOS token"):
        model.to_tokens("+ 1 2 =", prepend_bos=True)


@pytest.mark.parametrize(
    "text, message",
    [
        ("a=3 b=a + b 5 =", "'b=a': a variable is assigned a number 0..58, not another variable"),
        ("a=3 + b 5", "expected the core '+ LHS RHS =' at the end"),
        (
            "3 a + a 5 =",
            "prefix token '3' at position 10 is not PAD or the start of an assignment 'var value' "
            "(the text was padded to 16 tokens with 10 PADs in front)",
        ),
        ("z=3 + a 5 =", "an assignment starts with a variable a..l, got 'z'"),
    ],
)
def test_a_text_that_is_not_a_sequence_says_what_is_wrong(text, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        parse(text)


def test_a_bad_text_in_a_batch_is_named_by_its_index():
    with pytest.raises(ParseError, match=r"^sequence 1: unknown token 'x'"):
        to_tokens(["+ 1 2 =", "+ x 2 ="])


# ----- --help ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "module", ["assignadd.training.train_cli", "assignadd.training.sweep_cli", "assignadd.reports.verify_cli"]
)
def test_help_imports_neither_torch_nor_transformer_lens(module):
    code = (
        f"import sys, {module} as m\n"
        "p = m.build_parser() if hasattr(m, 'build_parser') else m._parser()\n"
        "p.format_help()\n"
        "print(sorted(x for x in ('torch', 'transformer_lens', 'numpy') if x in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_train_help_shows_the_defaults_of_the_optimizer_and_batch():
    from assignadd.training.train_cli import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "learning rate, constant (default 0.001)" in text
    assert "weight decay (default 0.02)" in text and "sequences per step (default 512)" in text


def test_sweep_help_shows_the_batch_default():
    from assignadd.training.sweep_cli import build_parser

    assert "sequences per step (default 512)" in " ".join(build_parser().format_help().split())


# ----- checkpoints -------------------------------------------------------------------------------------
def test_checkpoints_are_readable_by_others_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        save_checkpoint(AssignAddTransformer(seed=0), tmp_path / "step_000001.pt", step=1)
    finally:
        os.umask(old)
    assert (tmp_path / "step_000001.pt").stat().st_mode & 0o777 == 0o644


def _npz(path):
    np.savez(path, a=np.zeros(3))


@pytest.mark.parametrize(
    "name, write, what",
    [
        ("notes.txt", lambda p: p.write_text("hello\nworld\n"), "a text file, not a torch.save file"),
        ("config.json", lambda p: p.write_text('{"d_model": 128}'), "a JSON file, not a torch.save file"),
        ("plot.png", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32), "a PNG image"),
        ("weights.npy", lambda p: np.save(p, np.zeros(3)), "a NumPy .npy array"),
        ("weights.npz", _npz, "a NumPy .npz archive, not a torch.save file"),
        (
            "model.safetensors",
            lambda p: p.write_bytes((20).to_bytes(8, "little") + b'{"__metadata__":{}}  '),
            "a safetensors file",
        ),
        ("other.zip", lambda p: zipfile.ZipFile(p, "w").writestr("readme.txt", "x"), "a zip archive without data.pkl"),
    ],
)
def test_a_file_that_is_not_a_checkpoint_is_named_for_what_it_is(tmp_path, name, write, what):
    path = tmp_path / name
    write(path)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    assert str(e.value).startswith(f"{path}: not a checkpoint: {what}")
    assert "(101)" not in str(e.value) and "could run code" not in str(e.value)


@pytest.mark.parametrize("legacy", [False, True])
def test_protocol_4_files_load_or_are_refused_without_torchs_protocol_warning(tmp_path, legacy):
    path = tmp_path / "checkpoint_step_1.pth"
    torch.save(
        AssignAddTransformer(seed=0).state_dict(), path, pickle_protocol=4, _use_new_zipfile_serialization=not legacy
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if legacy:  # the pre-2020 format: refused, saying what it is
            with pytest.raises(CheckpointError, match="a plain pickle .protocol 4., not a zip-format torch.save"):
                load_checkpoint(path)
        else:
            load_checkpoint(path)
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CheckpointError, match="plain pickle"):
            load_checkpoint(raw)


@pytest.mark.parametrize(
    "name, step",
    [
        ("checkpoint_step_39901.pth", 39901),
        ("step_000100.pth", 100),
        ("model_state_dict.pth", None),
        ("run-step-7.pt", 7),
    ],
)
def test_a_bare_state_dict_takes_its_step_from_the_file_name(tmp_path, name, step):
    torch.save(AssignAddTransformer(seed=0).state_dict(), tmp_path / name)
    meta = load_checkpoint_full(tmp_path / name)[1]
    assert meta["step"] == step and (meta.get("step_source") == "file name") == (step is not None)


@pytest.fixture
def fake_pass():
    from assignadd.hypotheses import REGISTRY, register

    register(_FakePass)
    yield
    REGISTRY.pop(PASS, None)


def test_a_bare_state_dict_is_scored_on_the_task_the_user_names(tmp_path, capsys, fake_pass):
    bare = tmp_path / "checkpoint_step_39901.pth"
    torch.save(AssignAddTransformer(seed=0).state_dict(), bare)
    out = tmp_path / "r.json"
    assert (
        verify_main([str(bare), "--only", PASS, "--json", str(out), "--quiet", "--f", "0.5", "--split-seed", "7"]) == 0
    )
    r = json.loads(out.read_text())
    assert r["task_source"] == "command line" and (r["task"]["f"], r["task"]["seed"], r["task"]["r"]) == (0.5, 7, 1.0)
    assert r["checkpoint"]["step"] == 39901
    assert "the task was given on the command line" in capsys.readouterr().out
    # Without the flags: the paper's task, and the terminal says so.
    assert verify_main([str(bare), "--only", PASS, "--quiet"]) == 0
    assert "note: the checkpoint holds no task, so the claims ran on the paper's" in capsys.readouterr().out


def test_a_task_flag_that_contradicts_the_checkpoint_is_refused(tmp_path, capsys, fake_pass):
    ours = tmp_path / "step_000001.pt"
    save_checkpoint(AssignAddTransformer(seed=0), ours, step=1, task={"f": 0.7, "r": 1.0, "seed": 42})
    assert verify_main([str(ours), "--only", PASS, "--quiet", "--f", "0.5"]) == 2
    assert "the checkpoint records its task (f = 0.7); --f 0.5 contradicts it" in capsys.readouterr().err


def test_verify_says_where_the_report_was_written(tmp_path, capsys, fake_pass):
    ours = tmp_path / "step_000001.pt"
    save_checkpoint(AssignAddTransformer(seed=0), ours, step=1)
    assert verify_main([str(ours), "--only", PASS, "--out", str(tmp_path / "out"), "--n", "20"]) == 0
    assert f"report written to {tmp_path / 'out' / 'report.html'}" in capsys.readouterr().err


# ----- the package as installed ---------------------------------------------------------------------
def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _imported_top_level_modules() -> set[str]:
    names = set()
    for path in _source_files():
        if path.suffix != ".py" or {"bench", "tools"} & set(path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("assignadd", "_pytest")}


def _norm(name: str) -> str:
    return re.split(r"[<>=!~\[; ]", name, maxsplit=1)[0].lower().replace("_", "-")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_every_imported_package_is_declared_and_every_declared_one_is_used():
    from importlib.metadata import packages_distributions

    project = _pyproject()["project"]
    declared = {_norm(d) for d in project["dependencies"]}
    optional = {_norm(d) for deps in project.get("optional-dependencies", {}).values() for d in deps}
    dist_of = packages_distributions()
    imported = {_norm(dist_of.get(m, [m])[0]) for m in _imported_top_level_modules()}
    assert imported - declared - optional == set(), "imported but not declared"
    assert declared - imported == set(), "declared but never imported"
    assert "seaborn" not in declared and "scipy" in declared


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_pyproject_needs_no_deprecated_license_table_and_lists_its_data_folders():
    config = _pyproject()
    assert isinstance(config["project"]["license"], str)  # an SPDX expression, not a table
    packages = set(config["tool"]["setuptools"]["packages"])
    data_dirs = {
        "assignadd." + ".".join(p.relative_to(ROOT).parts)
        for pattern in ("checkpoints", "checkpoints/series", "reports/schemas")
        for p in [ROOT / pattern]
    }
    assert data_dirs <= packages


# ----- the docs (in a clone; an installed wheel has no docs) -----------------------------------------
needs_clone = pytest.mark.skipif(not (ROOT / "docs" / "spec.md").exists(), reason="not a clone of the repository")
SKIP_DIRS = {".venv", ".git", "out", "runs", "__pycache__", "assignadd.egg-info", "node_modules"}


def _source_files():
    """The repository's .py, .md and .toml files (not the virtual environment's, not outputs)."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith((".py", ".md", ".toml")):
                yield Path(folder) / name


def _spec_sections() -> set[str]:
    text = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, re.M))


@needs_clone
def test_every_spec_reference_in_the_repository_resolves_to_docs_spec_md():
    sections = _spec_sections()
    assert {"1", "1.1", "1.4", "2.4", "3", "4.5", "5", "6"} <= sections
    missing = []
    for path in _source_files():
        for ref in re.findall(r"SPEC §(\d+(?:\.\d+)?)", path.read_text(encoding="utf-8", errors="replace")):
            if ref not in sections:
                missing.append(f"{path.relative_to(ROOT)}: SPEC §{ref}")
    assert missing == []


@needs_clone
def test_readme_and_docs_cite_no_issue_numbers_a_user_cannot_see():
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "checkpoints" / "SEEDS.md"]:
        if path.name in ("dynamics.md", "sweeps.md", "hypotheses.md"):
            continue  # kept by their own authors
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bissue[s]? ?#?\d|\(issue \d|foundation issue|the issue's", text, re.I), path.name


@needs_clone
def test_readme_leads_with_the_two_commands_and_says_what_spec_means():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = text.index("make verify")
    assert first < text.index("make test") < 1200
    assert "docs/spec.md" in text[:3000]
    assert "| run seed |" not in text  # the seed table lives in checkpoints/SEEDS.md


@needs_clone
def test_the_readme_quickstart_runs_as_written():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len(block.strip().splitlines()) <= 12
    exec(compile(block, "README quickstart", "exec"), {})


def test_checkpoint_metadata_reads_without_torchs_protocol_warning(tmp_path):
    from assignadd.model import read_checkpoint_file

    path = tmp_path / "checkpoint_step_5.pth"
    torch.save(AssignAddTransformer(seed=0).state_dict(), path, pickle_protocol=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert set(read_checkpoint_file(path)) >= {"embed.W_E", "unembed.W_U"}
