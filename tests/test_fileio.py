"""``fileio``: the one owner of writing files whole and of the SHA-256 of a file (issue "One owner per
operation"), and ``checkpoint.atomic_save`` on top of it."""

from __future__ import annotations

import hashlib
import os

import pytest
import torch

from assignadd.fileio import atomic_write, atomic_write_files, commit_folder, sha256_bytes, sha256_file, stage_folder
from assignadd.model.checkpoint import atomic_save


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_atomic_write_writes_text_as_utf8_with_newlines_kept_and_bytes_as_they_are(tmp_path):
    atomic_write(tmp_path / "a" / "b.txt", "θ\r\nx\n")  # parent folders made
    assert (tmp_path / "a" / "b.txt").read_bytes() == "θ\r\nx\n".encode("utf-8")
    atomic_write(tmp_path / "c.bin", b"\x00\xff")
    assert (tmp_path / "c.bin").read_bytes() == b"\x00\xff"


def test_files_and_folders_get_the_umask_permissions_not_the_private_temp_ones(tmp_path, umask_022):
    atomic_write(tmp_path / "x.json", "{}")
    atomic_write_files(tmp_path / "report", {"a.json": "{}", "b.png": b"png"})
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "report").stat().st_mode & 0o777 == 0o755
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "report").iterdir()} == {0o644}


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    from assignadd.fileio import atomic_write_with

    target = tmp_path / "resume.pt"
    target.write_text("old")

    def fail(fh):
        fh.write(b"half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write_with(target, fail)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["resume.pt"]


def test_a_new_report_folder_appears_whole(tmp_path):
    out = atomic_write_files(tmp_path / "deep" / "out", {"r.json": "{}\n", "r.html": "<p>é</p>"})
    assert sorted(os.listdir(out)) == ["r.html", "r.json"] and os.listdir(tmp_path / "deep") == ["out"]
    assert (out / "r.html").read_text(encoding="utf-8") == "<p>é</p>"


def test_an_existing_report_folder_gets_its_files_replaced_and_keeps_the_others(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.json").write_text("old")
    (out / "notes.txt").write_text("mine")
    atomic_write_files(out, {"r.json": "new"})
    assert (out / "r.json").read_text() == "new" and (out / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(out)) == ["notes.txt", "r.json"] and os.listdir(tmp_path) == ["out"]


def test_a_failed_report_moves_nothing_in_and_leaves_no_staging(tmp_path):
    class Bad(str):
        def encode(self, *a, **k):
            raise RuntimeError("cannot render")

    with pytest.raises(RuntimeError):
        atomic_write_files(tmp_path / "out", {"a.json": "{}", "b.json": Bad("x")})
    assert os.listdir(tmp_path) == []


def test_stage_then_commit_for_a_caller_that_writes_files_one_at_a_time(tmp_path):
    out = tmp_path / "out"
    staging = stage_folder(out)
    assert staging.parent == tmp_path and staging.name.startswith(".out.") and not out.exists()
    (staging / "report.json").write_text("{}")
    commit_folder(staging, out)
    assert os.listdir(tmp_path) == ["out"] and os.listdir(out) == ["report.json"]


def test_a_file_where_the_report_folder_should_be_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(NotADirectoryError):
        atomic_write_files(tmp_path / "out", {"a": "b"})


def test_sha256_of_a_file_and_of_bytes(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)  # more than one chunk
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == sha256_bytes(data) == hashlib.sha256(data).hexdigest()


def test_atomic_save_gives_the_same_bytes_for_the_same_object_and_loads_back(tmp_path):
    obj = {"step": 3, "state_dict": {"w": torch.arange(6.0).reshape(2, 3)}}
    atomic_save(obj, tmp_path / "a.pt")
    atomic_save(obj, tmp_path / "b.pt")
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    back = torch.load(tmp_path / "a.pt", weights_only=True)
    assert back["step"] == 3 and torch.equal(back["state_dict"]["w"], obj["state_dict"]["w"])
    assert sorted(os.listdir(tmp_path)) == ["a.pt", "b.pt"]


def test_png_bytes_are_the_same_for_the_same_figure_and_carry_no_software_entry():
    from assignadd.reports.png import PAGE_DPI, png_bytes, pyplot

    def draw():
        fig, ax = pyplot().subplots(figsize=(2, 2))
        ax.plot([0, 1], [1, 0])
        return fig

    a, b = png_bytes(draw(), dpi=PAGE_DPI, tight=True), png_bytes(draw(), dpi=PAGE_DPI, tight=True)
    assert a == b and a.startswith(b"\x89PNG") and b"Software" not in a and b"matplotlib" not in a.lower()
