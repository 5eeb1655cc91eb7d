"""Regenerate every generated page of docs/ from the code, one target at a time in a fixed order, each by
the command that makes it; ``--check`` says which pages in docs/ are not what the code makes now.

    python tools/regenerate_docs.py                  # the cheap targets (seconds), rewritten in docs/
    python tools/regenerate_docs.py --expensive      # every target: training runs, matrices (hours)
    python tools/regenerate_docs.py --only NAME ...  # the named targets, cheap or expensive
    python tools/regenerate_docs.py --check          # regenerate into a copy of docs/, compare, exit 1 if stale
    python tools/regenerate_docs.py --list           # every target and archived record, with its command

A *target* is a set of files in docs/ and what writes them (``TARGETS``, in the order they run). The cheap
ones run by default; the expensive ones (a measurement of minutes, or training runs of an hour each
before a report) only with ``--expensive`` or when named with ``--only``, and are said to be skipped
otherwise. Training runs go to ``--work`` (default ``runs/regenerate_docs``, outside git) and are reused
there when their ``final.pt`` exists, so a target that was stopped picks up where it was, and two targets
that need the same run (seeds 0-3 of the paper's configuration) train it once.

``--check`` copies docs/ into a temporary folder, regenerates the selected targets there and compares
every file they own with docs/ byte for byte: one line per stale file, exit 1 if any is, 0 if all are
current. Every page here is the same bytes for the same code and inputs (figures carry no software
version or date; ``docs/nulls.json`` keeps its date and commit when re-measured numbers are unchanged,
``tools/measure_nulls.py``), except the sweep reports, which record each point's training wall time:
those times are left out of their comparison.

An *archived record* (``ARCHIVED``) is a generated file that the research record cites as the output of
earlier code (a rule version, a mutant set, a commit it names) on runs whose weights are not shipped;
rewriting it with today's code would change what the text around it describes, so this tool never does.
Each names the command that wrote it.

tests/test_generated_docs.py runs the cheap targets' check, and checks that every file in the generated
folders belongs to one target or record, exists, and is listed in docs/README.md with its command.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WORK = ROOT / "runs" / "regenerate_docs"
TOOL = "python tools/regenerate_docs.py"
# The folders whose every file is a target's output or an archived record (besides the files named by
# the targets elsewhere in docs/); their README.md, the research record's page, is the exception.
GENERATED_FOLDERS = ("calibration_results", "figures", "mutation_results", "sweep_results", "variants")
HAND_WRITTEN = ("mutation_results/README.md",)

INDEX_BEGIN = "<!-- generated:outputs -->"
INDEX_END = "<!-- end generated -->"


@dataclass(frozen=True)
class Target:
    """Files of docs/ (``outputs``: paths relative to docs/, a ``*`` pattern for a folder's files, ``**``
    for all below it) and ``build(docs_root, work)``, which writes them under ``docs_root`` (docs/ itself, or
    its copy under ``--check``) by ``command``, the shipped command(s) it runs."""

    name: str
    outputs: tuple[str, ...]
    links: str  # the outputs as docs/README.md links them
    command: str
    cost: str  # measured here, or as the research record gives it
    build: Callable[[Path, Path], None]
    expensive: bool = False
    # file -> bytes with what differs between two runs of the same code left out (for --check); none: as is
    normalise: Callable[[str, bytes], bytes] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Archived:
    """Generated files kept as written: the output of earlier code, cited as such by the research record."""

    outputs: tuple[str, ...]
    links: str
    command: str
    why: str


@dataclass(frozen=True)
class Stale:
    target: str
    path: str  # relative to docs/
    summary: str

    def line(self) -> str:
        return f"stale docs/{self.path}: {self.summary} (regenerate: {TOOL} --only {self.target})"


def _tool(name: str):
    """The module ``tools/NAME.py`` (the tools are scripts, not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _write(path: Path, content: str | bytes) -> None:
    from assignadd.fileio import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, content)


CLI = {
    "assignadd-train": "assignadd.training.train_cli",
    "assignadd-sweep": "assignadd.training.sweep_cli",
    "assignadd-verify": "assignadd.reports.verify_cli",
    "assignadd-report": "assignadd.reports.report_cli",
    "assignadd-mutants": "assignadd.reports.mutants_cli",
}
# Exit 1 of these is a verdict (a claim that does not pass, a mutant cell not as expected), not a failure
# to write the report: the files are written either way.
VERDICT_EXIT = ("assignadd-verify", "assignadd-report", "assignadd-mutants")


def _run(args: list, cwd: Path | None = None) -> None:
    """A shipped command (``assignadd-*`` by its module, a tool by its path) with this Python; its output
    passes through; a failure stops the target."""
    args = [str(a) for a in args]
    print("  $ " + " ".join(args), flush=True)
    command = [sys.executable, "-m", CLI[args[0]], *args[1:]] if args[0] in CLI else [sys.executable, *args]
    code = subprocess.run(command, cwd=cwd or ROOT).returncode
    if code and not (code == 1 and args[0] in VERDICT_EXIT):
        raise subprocess.CalledProcessError(code, args)


# --- the cheap targets ----------------------------------------------------------------------------------


def build_thresholds(docs: Path, work: Path) -> None:
    """docs/thresholds.md and the generated block of every claim page (``tools/thresholds_doc.py``)."""
    tool = _tool("thresholds_doc")
    results = tool.claim_results()
    pages = {p.stem: tool.read(p) for p in sorted((docs / "claims").glob("*.md"))}
    tool.check_pages(set(pages))
    rendered = {c: tool.render_page(c, text, results) for c, text in pages.items()}  # fails before writing
    _write(docs / "thresholds.md", tool.render(results))
    for claim, text in rendered.items():
        _write(docs / "claims" / f"{claim}.md", text)


def build_nulls_page(docs: Path, work: Path) -> None:
    """docs/nulls.md from docs/nulls.json (``tools/measure_nulls.py --render``)."""
    tool = _tool("measure_nulls")
    _write(docs / "nulls.md", tool.render(json.loads((docs / "nulls.json").read_text())))


def index_table() -> str:
    """docs/README.md's generated block: every target, then every archived record."""
    lines = [
        "| target | files | written by | cost (2-core CPU) |",
        "|---|---|---|---|",
    ]
    for t in TARGETS:
        name = f"`{t.name}`" + (" (expensive)" if t.expensive else "")
        lines.append(f"| {name} | {t.links} | {t.command} | {t.cost} |")
    lines += [
        "",
        "Archived records: generated once by earlier code on runs whose weights are not shipped, and cited",
        "as such by the research record; never rewritten (today's code would write other numbers).",
        "",
        "| files | written by | why kept as written |",
        "|---|---|---|",
    ]
    lines += [f"| {a.links} | {a.command} | {a.why} |" for a in ARCHIVED]
    return "\n".join(lines) + "\n"


def build_index(docs: Path, work: Path) -> None:
    """The block between ``INDEX_BEGIN`` and ``INDEX_END`` in docs/README.md; the rest kept byte for byte."""
    path = docs / "README.md"
    text = path.read_bytes().decode("utf-8")
    begin, end = text.find(INDEX_BEGIN + "\n"), text.find("\n" + INDEX_END)
    if begin < 0 or end < begin or text.count(INDEX_BEGIN) != 1 or text.count(INDEX_END) != 1:
        raise ValueError(f"{path}: needs one {INDEX_BEGIN!r} line and one {INDEX_END!r} line after it")
    start = begin + len(INDEX_BEGIN) + 1
    _write(path, text[:start] + index_table() + text[end + 1 :])


# --- the expensive targets ------------------------------------------------------------------------------


def build_nulls(docs: Path, work: Path) -> None:
    """docs/nulls.json (``tools/measure_nulls.py``, the measurement only; ``nulls_page`` renders it)."""
    tool = _tool("measure_nulls")
    path = docs / "nulls.json"
    previous = json.loads(path.read_text()) if path.exists() else None
    _write(path, json.dumps(tool.keep_stamp(tool.measure(), previous), indent=1) + "\n")


def train(work: Path, name: str, *options) -> Path:
    """``assignadd-train WORK/NAME OPTIONS`` unless its final.pt is there; returns the run folder."""
    run = work / name
    if (run / "final.pt").exists():
        print(f"  reusing {run}/final.pt", flush=True)
    else:
        _run(["assignadd-train", run, *options])
    return run


def paper_seed(work: Path, seed: int) -> Path:
    """A run of the paper's configuration (40,000 steps, ``--precision auto``) with run seed ``seed``."""
    return train(work, f"seed{seed}", "--seed", seed)


def _variant(name: str, folder: str, *options) -> Callable[[Path, Path], None]:
    def build(docs: Path, work: Path) -> None:
        train(work, folder, *options, "--threads", 1)
        out = work / f"verify_{folder}"
        # run inside the work folder: the report names the checkpoint as given, ``FOLDER/final.pt``
        _run(["assignadd-verify", f"{folder}/final.pt", "--out", out], cwd=work)
        for report in ("report.json", "report.md"):
            _write(docs / "variants" / name / report, (out / report).read_bytes())

    return build


def build_calibration(docs: Path, work: Path) -> None:
    """``assignadd-mutants --calibrate reference.pt seed0.pt seed1.pt --n 500`` (docs/calibration.md)."""
    import assignadd

    folder = work / "calibration"
    folder.mkdir(parents=True, exist_ok=True)
    sources = {"reference.pt": Path(assignadd.reference_checkpoint())}
    sources.update({f"seed{s}.pt": paper_seed(work, s) / "final.pt" for s in (0, 1)})
    for name, source in sources.items():
        shutil.copyfile(source, folder / name)  # the table names each checkpoint as given
    out = docs / "calibration_results"
    out.mkdir(parents=True, exist_ok=True)
    _run(
        ["assignadd-mutants", "--calibrate", *sources, "--n", 500]
        + ["--json", out / "calibration.json", "--md", out / "calibration.md"],
        cwd=folder,
    )


def build_calibration_reference(docs: Path, work: Path) -> None:
    """``assignadd-mutants --calibrate checkpoints/reference.pt --n 500`` (docs/calibration.md, "The
    reference under the definitions of 2026-12-07")."""
    out = docs / "calibration_results"
    out.mkdir(parents=True, exist_ok=True)
    stem = out / "calibration_reference_2026-12-07"
    _run(
        ["assignadd-mutants", "--calibrate", "checkpoints/reference.pt", "--n", 500]
        + ["--json", stem.with_suffix(".json"), "--md", stem.with_suffix(".md")]
    )


def build_mutation_seed3(docs: Path, work: Path) -> None:
    """``assignadd-mutants CKPT --n 500`` on seed 3's final checkpoint (docs/calibration.md, "Seed 3")."""
    run = paper_seed(work, 3)
    out = docs / "mutation_results"
    out.mkdir(parents=True, exist_ok=True)
    _run(
        ["assignadd-mutants", run / "final.pt", "--n", 500]
        + ["--json", out / "seed3_step40000.json", "--md", out / "seed3_step40000.md"]
    )


def build_heldout_curves(docs: Path, work: Path) -> None:
    """``tools/heldout_curves.py`` over the seven runs of checkpoints/SEEDS.md (seed 42: the shipped run's
    log in checkpoints/, the others trained)."""
    runs = [ROOT / "checkpoints", *(paper_seed(work, s) for s in range(6))]
    out = docs / "figures" / "heldout_curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(["tools/heldout_curves.py", out, *runs])


def _sweeps(label: str, pooled: str, steps: int, grid: dict, shipped: dict) -> Callable[[Path, Path], None]:
    """Both halves of a sweep (``assignadd-sweep``, three seeds; started again, it skips finished points),
    a report of each half (``sweep_results/{param}_{label}``) and of both pooled (``sweep_results/{pooled}``)
    by ``assignadd-report``, and the weights of the ``shipped`` points re-saved into the half's
    ``weights/`` (``tools/compact_sweep_weights.py``). ``grid``: param -> values; ``shipped``: param ->
    point names."""

    def build(docs: Path, work: Path) -> None:
        from assignadd.training.sweep_folder import points_dir

        base = work / f"sweeps_{label}"
        for param, values in grid.items():
            _run(
                ["assignadd-sweep", "--param", param, "--values", ",".join(f"{v:g}" for v in values)]
                + ["--seeds", "0,1,2", "--steps", steps, "--early-stop", 3, "--jobs", 2, "--out", base / param]
            )
        reports = {f"{param}_{label}": base / param for param in grid} | {pooled: base}
        for name, folder in reports.items():
            _run(["assignadd-report", folder, "--out", docs / "sweep_results" / name])
        for param, points in shipped.items():
            weights = docs / "sweep_results" / f"{param}_{label}" / "weights"
            shutil.rmtree(weights, ignore_errors=True)
            weights.mkdir(parents=True)
            for point in points:
                shutil.copyfile(points_dir(base / param) / point / "final.pt", weights / f"{point}.pt")
            _run(["tools/compact_sweep_weights.py", weights])

    return build


_WALL_JSON = re.compile(rb'("train_wall_s": )[0-9.]+')
_WALL_HTML = re.compile(rb'(<span class="num">)[0-9]+ min(</span>)')
_COST_HTML = re.compile(rb"(Cost: )[0-9.]+( h of training wall time)")


def without_wall_time(name: str, data: bytes) -> bytes:
    """A sweep report's file with every point's training wall time (``train_wall_s``) blanked: the one
    thing in it that differs between two runs of the same sweep."""
    if name.endswith(".json"):
        return _WALL_JSON.sub(rb"\1null", data)
    if name.endswith(".csv"):
        rows = data.decode("utf-8").split("\n")
        column = rows[0].split(",").index("train_wall_s") if rows and "train_wall_s" in rows[0] else None
        if column is None:
            return data
        cut = [",".join("" if i == column else c for i, c in enumerate(r.split(","))) if r else r for r in rows[1:]]
        return "\n".join([rows[0], *cut]).encode("utf-8")
    if name.endswith(".html"):
        return _COST_HTML.sub(rb"\1?\2", _WALL_HTML.sub(rb"\1? min\2", data))
    return data


TARGETS: tuple[Target, ...] = (
    Target(
        "thresholds",
        ("thresholds.md", "claims/*.md"),
        "[thresholds.md](thresholds.md), the generated block of each page in [claims/](claims/)",
        "`python tools/thresholds_doc.py`",
        "7 s (19 s on a busy machine)",
        build_thresholds,
    ),
    Target(
        "nulls",
        ("nulls.json",),
        "[nulls.json](nulls.json)",
        "`python tools/measure_nulls.py` (the measurement; date and commit kept where the numbers are unchanged)",
        "2 min",
        build_nulls,
        expensive=True,
    ),
    Target(
        "nulls_page",
        ("nulls.md",),
        "[nulls.md](nulls.md)",
        "`python tools/measure_nulls.py --render` (from nulls.json)",
        "< 1 s",
        build_nulls_page,
    ),
    Target(
        "variant_two_heads",
        ("variants/two_heads/report.json", "variants/two_heads/report.md"),
        "[variants/](variants/) `two_heads/report.json`, `two_heads/report.md`",
        "`assignadd-train RUN --n-heads 2 --d-head 64 --threads 1`, then `assignadd-verify RUN/final.pt --out DIR`"
        " ([variants.md](variants.md))",
        "47 min training, then one verify",
        _variant("two_heads", "variant_2heads", "--n-heads", 2, "--d-head", 64),
        expensive=True,
    ),
    Target(
        "variant_three_layers",
        ("variants/three_layers/report.json", "variants/three_layers/report.md"),
        "[variants/](variants/) `three_layers/report.json`, `three_layers/report.md`",
        "`assignadd-train RUN --n-layers 3 --threads 1`, then `assignadd-verify RUN/final.pt --out DIR`"
        " ([variants.md](variants.md))",
        "71 min training, then one verify",
        _variant("three_layers", "variant_3layers", "--n-layers", 3),
        expensive=True,
    ),
    Target(
        "calibration",
        ("calibration_results/calibration.json", "calibration_results/calibration.md"),
        "[calibration_results/](calibration_results/) `calibration.json`, `calibration.md`",
        "`assignadd-train RUN --seed 0` and `--seed 1`, then `assignadd-mutants --calibrate reference.pt seed0.pt"
        " seed1.pt --n 500 --json ... --md ...` ([calibration.md](calibration.md))",
        "2 trainings of about 40 min, then 30 min",
        build_calibration,
        expensive=True,
    ),
    Target(
        "calibration_reference",
        (
            "calibration_results/calibration_reference_2026-12-07.json",
            "calibration_results/calibration_reference_2026-12-07.md",
        ),
        "[calibration_results/](calibration_results/) `calibration_reference_2026-12-07.*`",
        "`assignadd-mutants --calibrate checkpoints/reference.pt --n 500 --json ... --md ...`"
        " ([calibration.md](calibration.md))",
        "30 min",
        build_calibration_reference,
        expensive=True,
    ),
    Target(
        "mutation_seed3",
        ("mutation_results/seed3_step40000.json", "mutation_results/seed3_step40000.md"),
        "[mutation_results/](mutation_results/) `seed3_step40000.json`, `.md`",
        "`assignadd-train RUN --seed 3`, then `assignadd-mutants RUN/final.pt --n 500 --json ... --md ...`",
        "about 40 min training, then over 10 min",
        build_mutation_seed3,
        expensive=True,
    ),
    Target(
        "heldout_curves",
        ("figures/heldout_curves.png",),
        "[figures/](figures/) `heldout_curves.png`",
        "`assignadd-train RUN --seed S` for seeds 0-5, then `python tools/heldout_curves.py OUT.png checkpoints RUN...`"
        " (seed 42: the shipped run's log)",
        "6 trainings of about 40 min, then 1 min",
        build_heldout_curves,
        expensive=True,
    ),
    Target(
        "sweeps_30k",
        ("sweep_results/f_30k/**", "sweep_results/r_30k/**", "sweep_results/both_30k/**"),
        "[sweep_results/](sweep_results/) `f_30k/`, `r_30k/`, `both_30k/`",
        "`assignadd-sweep --param f` and `--param r` (three seeds, 30,000 steps), `assignadd-report` on each and on"
        " both, `python tools/compact_sweep_weights.py` ([sweeps.md](sweeps.md))",
        "about 14 h: 24 points of about 70 min, two at a time",
        _sweeps(
            "30k",
            "both_30k",
            30_000,
            {"f": (0.25, 0.275, 0.3), "r": (0.15, 0.175, 0.2, 0.225, 0.25)},
            {"f": ("f=0.25_seed=1", "f=0.275_seed=0"), "r": ("r=0.2_seed=0", "r=0.225_seed=0")},
        ),
        expensive=True,
        normalise=without_wall_time,
    ),
    Target(
        "sweeps_three_seeds",
        ("sweep_results/f_three_seeds/**", "sweep_results/r_three_seeds/**", "sweep_results/three_seeds/**"),
        "[sweep_results/](sweep_results/) `f_three_seeds/`, `r_three_seeds/`, `three_seeds/`",
        "`assignadd-sweep --param f` and `--param r` (three seeds, 20,000 steps), `assignadd-report` on each and on"
        " both, `python tools/compact_sweep_weights.py` ([sweeps.md](sweeps.md))",
        "about 10 h: 30 points of 32-40 min, two at a time",
        _sweeps(
            "three_seeds",
            "three_seeds",
            20_000,
            {"f": (0.2, 0.225, 0.25, 0.275, 0.3), "r": (0.15, 0.175, 0.2, 0.225, 0.25)},
            {"f": ("f=0.275_seed=0", "f=0.3_seed=0"), "r": ("r=0.175_seed=0", "r=0.225_seed=0")},
        ),
        expensive=True,
        normalise=without_wall_time,
    ),
    Target(
        "index",
        ("README.md",),
        "the tables of this section",
        f"`{TOOL}` (from its list of targets)",
        "< 1 s",
        build_index,
    ),
)

ARCHIVED: tuple[Archived, ...] = (
    Archived(
        ("sweep_results/sweep.json", "sweep_results/sweep.csv", "sweep_results/sweep.html")
        + ("sweep_results/sweep_f.png", "sweep_results/sweep_r.png"),
        "[sweep_results/](sweep_results/) `sweep.*`, `sweep_f.png`, `sweep_r.png`",
        "`assignadd-report runs/sweeps --out ...` (2026-11-30)",
        "the one-seed reduced protocol under rule version 1 ([sweeps.md](sweeps.md)); `rescore_report` re-decides it",
    ),
    Archived(
        tuple(f"mutation_results/seed{s}_step{k}.{e}" for s in (0, 1) for k in (22000, 40000) for e in ("json", "md"))
        + ("mutation_results/seed8_step40000.json", "mutation_results/seed8_step40000.md"),
        "[mutation_results/](mutation_results/) `seed0_*`, `seed1_*`, `seed8_*` (`.json`, `.md`)",
        "`assignadd-mutants CKPT --n 500` (`--n 1000` at step 22,000; 2026-11-30 and 12-01)",
        "the matrices as first run, with the mutants of their day ([mutation_results/README.md](mutation_results/README.md))",
    ),
    Archived(
        tuple(f"mutation_results/seed{s}_step40000_new_mutants.md" for s in (0, 1, 8)),
        "[mutation_results/](mutation_results/) `seed*_step40000_new_mutants.md`",
        "`assignadd-mutants CKPT --mutants unembedding_input_rotated,layer2_positions_out_of_keys,"
        "layer2_numbers_out_of_values --n 500` (2026-12-01)",
        "the three mutants added 2026-12-01, on the runs of their day",
    ),
    Archived(
        ("mutation_results/extra_mutants_2026-12-01.md",),
        "[mutation_results/extra_mutants_2026-12-01.md](mutation_results/extra_mutants_2026-12-01.md)",
        "63 mutants built outside the registry (no shipped command)",
        "a one-off search for mutants the claims cannot see, as run that day",
    ),
    Archived(
        ("calibration_results/calibration_seed2.json", "calibration_results/calibration_seed2.md"),
        "[calibration_results/](calibration_results/) `calibration_seed2.*`",
        "`assignadd-mutants --calibrate seed2.pt --n 500` (commit fb38b64)",
        "the held-out test of the interface fit sizes before the fitting draw ([calibration.md](calibration.md), "
        '"Seed 2")',
    ),
)


# --- running and checking -------------------------------------------------------------------------------


def by_name(name: str) -> Target:
    for t in TARGETS:
        if t.name == name:
            return t
    raise KeyError(name)


def files(docs: Path, patterns) -> list[str]:
    """The files under ``docs`` that ``patterns`` (paths relative to it, ``*`` / ``**`` patterns) name,
    relative to ``docs``, sorted; a plain path is named whether or not it exists."""
    out = set()
    for p in patterns:
        if p.endswith("/**"):
            out |= {str(f.relative_to(docs)) for f in (docs / p[:-3]).rglob("*") if f.is_file()}
        elif "*" in p:
            out |= {str(f.relative_to(docs)) for f in docs.glob(p) if f.is_file()}
        else:
            out.add(p)
    return sorted(out)


def select(only=None, expensive: bool = False) -> tuple[list[Target], list[Target]]:
    """(the targets to run, in ``TARGETS`` order; the expensive ones skipped). ``only``: names; every
    named target runs, expensive or not."""
    if only:
        unknown = [n for n in only if n not in {t.name for t in TARGETS}]
        if unknown:
            raise KeyError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(t.name for t in TARGETS)}")
        return [t for t in TARGETS if t.name in only], []
    run = [t for t in TARGETS if expensive or not t.expensive]
    return run, [t for t in TARGETS if t not in run]


def _summary(old: bytes | None, new: bytes | None) -> str:
    """One line saying how ``new`` (regenerated) differs from ``old`` (in docs/)."""
    if old is None:
        return f"missing from docs/ (regenerated: {len(new)} bytes)"
    if new is None:
        return "in docs/, but no longer written"
    try:
        a, b = old.decode("utf-8").splitlines(), new.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return f"binary file differs ({len(old)} -> {len(new)} bytes)"
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops:
        return "line ends or the final newline differ"
    removed, added = sum(i2 - i1 for _, i1, i2, _, _ in ops), sum(j2 - j1 for *_, j1, j2 in ops)
    _, i1, _, j1, _ = ops[0]
    first = (a[i1] if i1 < len(a) else b[j1] if j1 < len(b) else "").strip()
    return f"-{removed} +{added} lines, first at line {i1 + 1}: {first[:70]!r}"


def compare(target: Target, docs: Path, regenerated: Path) -> list[Stale]:
    """The files of ``target`` that differ between ``docs`` and ``regenerated`` (a copy of it, rebuilt)."""
    stale = []
    for rel in sorted(set(files(docs, target.outputs)) | set(files(regenerated, target.outputs))):
        old, new = docs / rel, regenerated / rel
        a = old.read_bytes() if old.is_file() else None
        b = new.read_bytes() if new.is_file() else None
        if a is not None and b is not None and target.normalise is not None:
            a, b = target.normalise(rel, a), target.normalise(rel, b)
        if a != b:
            stale.append(Stale(target.name, rel, _summary(a, b)))
    return stale


def run(targets, docs: Path = DOCS, work: Path = WORK, skipped=()) -> None:
    """Build ``targets`` into ``docs`` in ``TARGETS`` order, printing each with its elapsed time, and each
    of ``skipped`` where it would have run."""
    for t in TARGETS:
        if t in skipped:
            print(f"{t.name}: skipped (expensive: {t.cost}; --expensive or --only {t.name})", flush=True)
        elif t in targets:
            t0 = time.perf_counter()
            print(f"{t.name}: {', '.join(t.outputs)}", flush=True)
            t.build(docs, work)
            print(f"{t.name}: {time.perf_counter() - t0:.1f} s", flush=True)


def check(targets, docs: Path = DOCS, work: Path = WORK, skipped=()) -> list[Stale]:
    """Regenerate ``targets`` into a copy of ``docs`` and return every file of theirs that differs from
    ``docs`` as it was when the check began (a copy of that too: an edit made meanwhile is not a change)."""
    with tempfile.TemporaryDirectory(prefix="regenerate_docs.") as tmp:
        before, copy = Path(tmp) / "before", Path(tmp) / "docs"
        shutil.copytree(docs, before)
        shutil.copytree(before, copy)
        run(targets, copy, work, skipped)
        return [s for t in targets for s in compare(t, before, copy)]


def _plain(markdown: str) -> str:
    """A table cell as terminal text: code spans unquoted, links as their docs/ path."""
    return re.sub(r"\[[^]]*\]\(([^)]*)\)", r"docs/\1", markdown).replace("`", "")


def listing() -> str:
    """``--list``: every target in order, with its command and cost, then the archived records."""
    lines = []
    for t in TARGETS:
        lines.append(f"{t.name}{' (expensive)' if t.expensive else ''}: {', '.join(t.outputs)}")
        lines.append(f"    {_plain(t.command)}; {t.cost}")
    lines.append("archived records (never rewritten):")
    for a in ARCHIVED:
        lines.append(f"    {', '.join(a.outputs)}")
        lines.append(f"        {_plain(a.command)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--check", action="store_true", help="regenerate into a copy of docs/ and compare; exit 1 if stale")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these targets (expensive ones included)")
    p.add_argument("--expensive", action="store_true", help="the expensive targets too (training runs: hours)")
    p.add_argument("--work", type=Path, default=WORK, help=f"training runs (default {WORK.relative_to(ROOT)})")
    p.add_argument("--list", action="store_true", help="print every target and archived record, and exit")
    args = p.parse_args(argv)
    if args.list:
        print(listing())
        return 0
    try:
        targets, skipped = select(args.only, args.expensive)
    except KeyError as e:
        p.error(e.args[0])
    try:
        if not args.check:
            run(targets, DOCS, args.work.resolve(), skipped)
            return 0
        stale = check(targets, DOCS, args.work.resolve(), skipped)
    except subprocess.CalledProcessError as e:
        print(f"error: {' '.join(map(str, e.cmd))} exited {e.returncode}", file=sys.stderr)
        return 1
    for s in stale:
        print(s.line())
    print(f"{len(stale)} stale file(s)" if stale else f"every file of {len(targets)} target(s) is current")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
