"""The generated pages of docs/ are what the code makes now, and every one is accounted for.

The cheap targets of ``tools/regenerate_docs.py`` are regenerated into a copy of docs/ and compared byte
for byte with docs/ (the command's ``--check``). The expensive ones (training runs, matrices, calibration)
are not run here; for them, and for the archived records, each file must exist, belong to exactly one
target or record, and be listed in docs/README.md on a row that names the command writing it. Every file
in the generated folders must belong to one of them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "regenerate_docs.py"
README = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("regenerate_docs", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_the_cheap_generated_docs_are_current(tool):
    cheap, skipped = tool.select()
    assert cheap and all(not t.expensive for t in cheap) and all(t.expensive for t in skipped)
    stale = tool.check(cheap)
    assert stale == [], "generated docs out of date:\n" + "\n".join(s.line() for s in stale)


def test_a_stale_file_is_named_with_the_command_that_regenerates_it(tool, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    target = tool.by_name("nulls_page")
    (docs / "nulls.json").write_bytes((ROOT / "docs" / "nulls.json").read_bytes())
    current = (ROOT / "docs" / "nulls.md").read_text(encoding="utf-8")
    (docs / "nulls.md").write_text(current.replace("re-initialised", "re-initialized", 1), encoding="utf-8")
    stale = tool.check([target], docs)
    assert [s.path for s in stale] == ["nulls.md"]
    assert "-1 +1 lines" in stale[0].summary
    assert stale[0].line().startswith("stale docs/nulls.md: ")
    assert stale[0].line().endswith("(regenerate: python tools/regenerate_docs.py --only nulls_page)")
    (docs / "nulls.md").write_text(current, encoding="utf-8")
    assert tool.check([target], docs) == []


def test_check_exits_1_when_stale_and_0_when_current(tool, monkeypatch, tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "nulls.json").write_bytes((ROOT / "docs" / "nulls.json").read_bytes())
    (docs / "nulls.md").write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(tool, "DOCS", docs)
    assert tool.main(["--check", "--only", "nulls_page"]) == 1
    assert "stale docs/nulls.md" in capsys.readouterr().out
    assert tool.main(["--only", "nulls_page"]) == 0  # rewrites it
    assert tool.main(["--check", "--only", "nulls_page"]) == 0
    assert "is current" in capsys.readouterr().out.splitlines()[-1]


def test_expensive_targets_are_skipped_unless_asked_for(tool, capsys, tmp_path):
    run, skipped = tool.select()
    assert {t.name for t in skipped} == {t.name for t in tool.TARGETS if t.expensive} != set()
    tool.run([], tmp_path, tmp_path, skipped)
    said = capsys.readouterr().out.splitlines()
    assert said == [f"{t.name}: skipped (expensive: {t.cost}; --expensive or --only {t.name})" for t in skipped]
    assert [t.name for t in tool.select(["calibration", "thresholds"])[0]] == ["thresholds", "calibration"]
    assert len(tool.select(expensive=True)[0]) == len(tool.TARGETS)
    with pytest.raises(KeyError, match="unknown target.*nope"):
        tool.select(["nope"])


def _owners(tool) -> dict[str, list[str]]:
    """docs-relative file -> the targets and archived records that name it."""
    docs = tool.DOCS
    owners: dict[str, list[str]] = {}
    for t in tool.TARGETS:
        for f in tool.files(docs, t.outputs):
            owners.setdefault(f, []).append(t.name)
    for a in tool.ARCHIVED:
        for f in tool.files(docs, a.outputs):
            owners.setdefault(f, []).append(f"archived {a.links}")
    return owners


def test_every_generated_file_exists_and_has_one_owner(tool):
    owners = _owners(tool)
    missing = sorted(f for f in owners if not (tool.DOCS / f).is_file())
    assert missing == [], f"named by a target or record but not in docs/: {missing}"
    shared = {f: o for f, o in owners.items() if len(o) > 1}
    assert shared == {}, f"files with more than one owner: {shared}"
    for t in tool.TARGETS:
        assert tool.files(tool.DOCS, t.outputs), f"target {t.name} names no file"


def test_every_file_in_the_generated_folders_is_accounted_for(tool):
    owners = _owners(tool)
    found = {
        str(f.relative_to(tool.DOCS))
        for folder in tool.GENERATED_FOLDERS
        for f in (tool.DOCS / folder).rglob("*")
        if f.is_file()
    }
    orphans = sorted(found - set(owners) - set(tool.HAND_WRITTEN))
    assert orphans == [], (
        f"files in docs/ generated folders that no target of {TOOL.name} writes and no archived record names: "
        f"{orphans}; add a Target (or an Archived record) for them"
    )


def _row(name: str) -> str:
    rows = [line for line in README.splitlines() if line.startswith(f"| {name} |") or line.startswith(f"| {name} (")]
    assert len(rows) == 1, f"docs/README.md: expected one row for {name}, found {len(rows)}"
    return rows[0]


def _listed(row: str, rel: str) -> bool:
    """``rel`` (a docs-relative file) is linked on ``row``, itself or one of its folders."""
    parts = rel.split("/")
    links = {rel} | {"/".join(parts[:i]) + "/" for i in range(1, len(parts))}
    return any(f"]({link})" in row for link in links)


def test_every_target_is_listed_in_the_docs_index_with_its_command(tool):
    for t in tool.TARGETS:
        row = _row(f"`{t.name}`")
        assert t.command in row, f"docs/README.md: the row of {t.name} does not name {t.command}"
        if t.name != "index":
            unlisted = [f for f in tool.files(tool.DOCS, t.outputs) if not _listed(row, f)]
            assert unlisted == [], f"docs/README.md: the row of {t.name} does not link {unlisted}"
    assert "`python tools/regenerate_docs.py`" in README and "make docs" in README


def test_every_archived_record_is_listed_in_the_docs_index_with_its_command(tool):
    for a in tool.ARCHIVED:
        row = _row(a.links)
        assert a.command in row
        unlisted = [f for f in tool.files(tool.DOCS, a.outputs) if not _listed(row, f)]
        assert unlisted == [], f"docs/README.md: the row of {a.links} does not link {unlisted}"


def test_a_re_measured_null_with_the_same_numbers_keeps_the_files_stamp(tool):
    nulls = tool._tool("measure_nulls")
    shipped = json.loads((ROOT / "docs" / "nulls.json").read_text())
    again = {**shipped, "date": "2099-01-01", "commit": "0000000"}
    assert nulls.keep_stamp(again, shipped) == shipped
    assert json.dumps(nulls.keep_stamp(again, shipped), indent=1) + "\n" == (ROOT / "docs" / "nulls.json").read_text()
    moved = json.loads(json.dumps(again))
    moved["n"] = shipped["n"] + 1
    assert nulls.keep_stamp(moved, shipped)["date"] == "2099-01-01"
    assert nulls.keep_stamp(again, None) == again


def test_the_sweep_comparison_leaves_out_only_the_training_wall_time(tool):
    strip = tool.without_wall_time
    assert strip("sweep.json", b'{"train_wall_s": 4298.9, "x": 1}') == strip(
        "sweep.json", b'{"train_wall_s": 12.0, "x": 1}'
    )
    assert strip("sweep.json", b'{"train_wall_s": 1.0, "x": 1}') != strip(
        "sweep.json", b'{"train_wall_s": 1.0, "x": 2}'
    )
    csv = b"param,accuracy,train_wall_s\nf,0.5,4298.9\n"
    assert strip("sweep.csv", csv) == b"param,accuracy,train_wall_s\nf,0.5,\n"
    html = b'<span class="num">72 min</span> Cost: 3.1 h of training wall time <span class="num">0.948</span>'
    assert (
        strip("sweep.html", html)
        == b'<span class="num">? min</span> Cost: ? h of training wall time <span class="num">0.948</span>'
    )
    shipped = (ROOT / "docs" / "sweep_results" / "f_30k" / "sweep.json").read_bytes()
    assert strip("sweep.json", shipped) != shipped and b"train_wall_s" in strip("sweep.json", shipped)


def _fake_commands(tool, monkeypatch, work: Path) -> list[list[str]]:
    """Replace the shipped commands by stand-ins that write what each would write (a run's final.pt, a
    sweep's points, a report's files), and record every command line."""
    from assignadd.training.sweep_folder import points_dir

    calls: list[list[str]] = []

    def option(args, name):
        return args[args.index(name) + 1]

    def fake(args, cwd=None):
        args = [str(a) for a in args]
        calls.append(args)
        here = Path(cwd) if cwd else ROOT
        if args[0] == "assignadd-train":
            (Path(args[1]) / "final.pt").parent.mkdir(parents=True, exist_ok=True)
            (Path(args[1]) / "final.pt").write_bytes(b"weights")
        elif args[0] == "assignadd-sweep":
            for v in option(args, "--values").split(","):
                for s in option(args, "--seeds").split(","):
                    point = points_dir(option(args, "--out")) / f"{option(args, '--param')}={v}_seed={s}"
                    point.mkdir(parents=True, exist_ok=True)
                    (point / "final.pt").write_bytes(b"weights")
        elif args[0] in ("assignadd-verify", "assignadd-report"):
            out = here / option(args, "--out")
            out.mkdir(parents=True, exist_ok=True)
            names = ("report.json", "report.md") if args[0] == "assignadd-verify" else ("sweep.json", "sweep.csv")
            for name in names:
                (out / name).write_text(name)
        elif args[0] == "assignadd-mutants":
            for flag in ("--json", "--md"):
                (here / option(args, flag)).write_text(flag)
        elif args[0] == "tools/heldout_curves.py":
            Path(args[1]).write_bytes(b"png")
        elif args[0] == "tools/compact_sweep_weights.py":
            (Path(args[1]) / "MANIFEST.json").write_text("{}")

    monkeypatch.setattr(tool, "_run", fake)
    return calls


def test_each_expensive_target_runs_its_commands_and_writes_its_files(tool, monkeypatch, tmp_path):
    # The builds with stand-ins for the commands (the real ones train for hours): what each runs, in which
    # order, and that it writes the files the target owns, under the folder it is given.
    work = tmp_path / "work"
    calls = _fake_commands(tool, monkeypatch, work)
    monkeypatch.setattr(tool._tool("measure_nulls"), "measure", lambda: {"numbers": 1})
    for t in tool.TARGETS:
        if not t.expensive:
            continue
        docs = tmp_path / t.name
        docs.mkdir()
        calls.clear()
        t.build(docs, work)
        written = set(tool.files(docs, t.outputs))
        expected = {f for f in tool.files(tool.DOCS, t.outputs) if not f.endswith(".png") or t.name == "heldout_curves"}
        if t.name.startswith("sweeps_"):  # the stand-in report writes two of a report's files
            expected = {f for f in expected if f.endswith(("sweep.json", "sweep.csv", ".pt", "MANIFEST.json"))}
        assert written == expected, t.name
        if t.name == "nulls":
            continue
        commands = [c[0] for c in calls]
        if t.name == "calibration_reference":  # the bundled checkpoint: nothing to train first
            assert commands == ["assignadd-mutants"] and calls[0][1:3] == ["--calibrate", "checkpoints/reference.pt"]
            continue
        assert commands[0] in ("assignadd-train", "assignadd-sweep"), (t.name, commands)
    calls.clear()
    tool.by_name("calibration").build(tmp_path / "calibration", work)  # the runs are there now: reused
    assert [c[0] for c in calls] == ["assignadd-mutants"]
    assert calls[0][1:5] == ["--calibrate", "reference.pt", "seed0.pt", "seed1.pt"]
