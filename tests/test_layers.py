"""The package's rooms import one way: from a room to the rooms below it, never up, and no module
imports itself back through others.

The rooms, lowest first (a room may import any room below it, and itself):

    root           fileio, random_streams, cli_util, the package's __init__: utilities for every room
    data           the task, tokens and pools (SPEC §1)
    model          the transformer and its checkpoints (SPEC §2)
    training       training runs and sweeps (SPEC §3); reads data and model
    interventions  running a model under edits; reads data and model
    hypotheses     the claims (SPEC §4); reads everything below, and training's sweep folders
    reports        the commands and what they write; reads everything

Every ``import`` and ``from ... import`` of the package is read with ``ast``, wherever it sits (at the
top of a module, inside a function, under ``if TYPE_CHECKING``), relative or absolute
(``assignadd.``). ``from pkg import name`` is an edge to ``pkg`` (Python runs its ``__init__``), and to
``pkg.name`` too where that is a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("root", "data", "model", "training", "interventions", "hypotheses", "reports")
NOT_PACKAGE = {"tests", "bench", "tools", "checkpoints", "docs"}


def modules() -> dict[str, Path]:
    """{dotted name: file} of every module of the package (tests, benches and tools left out)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in NOT_PACKAGE or any(p.startswith(".") or p.endswith(".egg-info") for p in rel.parts):
            continue
        parts = ("assignadd", *rel.with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(mods: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) for every import of one package module by another."""

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges = set()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [source] + [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in mods]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == "assignadd" and (found := known(target)) and found != name:
                    edges.add((name, found))
    return edges


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "root"


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_reader_finds_the_imports_it_must():
    """The reader sees relative, absolute and in-function imports (a reader that saw none would pass)."""
    edges = imports(modules())
    assert ("assignadd.training.train", "assignadd.model.transformer") in edges  # from ..model.transformer import
    assert ("assignadd.model.transformer", "assignadd.data.tokens") in edges
    assert ("assignadd.training.train_cli", "assignadd.training.train") in edges  # inside main
    assert {room(m) for m in modules()} == set(ROOMS)


def test_the_checks_catch_a_back_arrow_and_a_cycle():
    edges = {("assignadd.data.a", "assignadd.reports.b"), ("assignadd.model.x", "assignadd.model.y")}
    assert [(a, b) for a, b in edges if ROOMS.index(room(a)) < ROOMS.index(room(b))] == [
        ("assignadd.data.a", "assignadd.reports.b")
    ]
    assert cycles(edges | {("assignadd.model.y", "assignadd.model.x")}) == [["assignadd.model.x", "assignadd.model.y"]]


def test_no_room_imports_a_room_above_it():
    edges = imports(modules())
    upward = sorted((a, b) for a, b in edges if ROOMS.index(room(a)) < ROOMS.index(room(b)))
    assert upward == [], "imports from a lower room to a higher one:\n" + "\n".join(f"{a} -> {b}" for a, b in upward)


def test_no_import_cycle():
    found = cycles(imports(modules()))
    assert found == [], "modules that import each other, directly or through others:\n" + "\n".join(
        " <-> ".join(c) for c in found
    )
