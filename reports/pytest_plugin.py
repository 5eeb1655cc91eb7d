"""pytest plugin: every registered claim as a test item, on any checkpoint (``--assignadd-checkpoint PATH``,
repeatable; ``reference`` is the bundled one). Ids, options and an example: docs/reports.md, "The pytest
plugin"; results match ``assignadd-verify`` with the same seed and pool size.

Installed as the ``pytest11`` entry point ``assignadd``, so it is loaded by every pytest run in the
environment: nothing heavy is imported here unless ``--assignadd-checkpoint`` is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

MARKER = "assignadd_claim"
JUNIT_CLASSNAME = "assignadd.claims"  # as in assignadd-verify's junit.xml
_RUNS = pytest.StashKey[dict]()


# The options after ``--assignadd-checkpoint``, in help order; ``--assignadd-NAME`` lands in ``assignadd_NAME``.
OPTIONS = {
    "only": dict(metavar="ID,...", default=None, help="comma-separated claim ids (default: all registered)"),
    "n": dict(type=int, default=2000, metavar="N", help="evaluation pool size (default 2000)"),
    "seed": dict(type=int, default=0, metavar="N", help="seed for pools and resampling (default 0)"),
    "device": dict(default="cpu", choices=("cpu", "cuda"), help="device (default cpu)"),
    **{
        name: dict(
            type=kind,
            default=None,
            metavar=metavar,
            help=f"the task's {what} for checkpoints that record no task (default: the paper's {paper})",
        )
        for name, kind, metavar, what, paper in (
            ("f", float, "F", "f", 0.7),
            ("r", float, "R", "r", 1.0),
            ("split-seed", int, "N", "split seed", 42),
        )
    },
    "jobs": dict(
        type=int,
        default=None,
        metavar="N",
        help="run a checkpoint's claims side by side in N forked processes (default: one per usable "
        "core; 1 where fork is unavailable); verdicts do not depend on N",
    ),
}


def pytest_addoption(parser):
    group = parser.getgroup("assignadd", "assignadd: the paper's claims as test items")
    group.addoption(
        "--assignadd-checkpoint",
        action="append",
        default=[],
        metavar="PATH",
        dest="assignadd_checkpoints",
        help="checkpoint to test every registered claim on (repeatable; 'reference' = the bundled one)",
    )
    for name, kwargs in OPTIONS.items():
        group.addoption(f"--assignadd-{name}", dest="assignadd_" + name.replace("-", "_"), **kwargs)


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARKER}: a claim of assignadd run on a checkpoint (--assignadd-checkpoint)")


def _resolve(path: str) -> Path:
    if path == "reference":
        from .. import reference_checkpoint

        return reference_checkpoint()
    return Path(path)


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection, so those select claim items too
def pytest_collection_modifyitems(session, config, items):
    paths = config.getoption("assignadd_checkpoints")
    if not paths:
        return
    if config.getoption("assignadd_n") < 1:
        raise pytest.UsageError(f"--assignadd-n must be positive, got {config.getoption('assignadd_n')}")
    jobs = config.getoption("assignadd_jobs")
    if jobs is not None and jobs < 1:
        raise pytest.UsageError(f"--assignadd-jobs must be a positive number of processes, got {jobs}")
    from ..hypotheses import REGISTRY

    only = config.getoption("assignadd_only")
    if only is not None:
        only = [s.strip() for s in only.split(",") if s.strip()]
        unknown = [i for i in only if i not in REGISTRY]
        if unknown or not only:
            raise pytest.UsageError(
                f"--assignadd-only: unknown claim id(s) {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(REGISTRY) or 'none'}"
            )
    ids = [i for i in REGISTRY if only is None or i in only]
    resolved = [(p, _resolve(p)) for p in dict.fromkeys(paths)]
    names = [r.name for _, r in resolved]
    for given, path in resolved:
        label = path.name if names.count(path.name) == 1 else given  # the full path only where names clash
        claims = CheckpointClaims.from_parent(
            session, name=label, nodeid=f"assignadd@{label}", path=path, given=given, label=label, ids=ids
        )
        # genitems reports the collection, so "collected N items" counts the claims.
        items.extend(session.genitems(claims))


class CheckpointClaims(pytest.Collector):
    """The claims on one checkpoint."""

    def __init__(self, *, given: str, label: str, ids: list[str], **kwargs):
        super().__init__(**kwargs)
        self.given, self.label, self.ids = given, label, ids

    def collect(self):
        out = []
        for cid in self.ids:
            name = f"{cid}[{self.label}]"  # the checkpoint as a parameter: pytest shows it as such
            # "assignadd.claims::" gives JUnit XML a classname (pytest takes it from the node id's path part).
            item = ClaimItem.from_parent(
                self, name=name, nodeid=f"{JUNIT_CLASSNAME}::{name}", path=self.path, claim=cid, given=self.given
            )
            item.add_marker(MARKER)
            out.append(item)
        return out


class ClaimFailed(Exception):
    def __init__(self, result: dict):
        super().__init__(result["reason"])
        self.result = result


@dataclass(frozen=True)
class _Crash:
    """Where and why, in one line: what pytest's short summary and JUnit's ``message`` show."""

    path: str
    lineno: int
    message: str


class ClaimFailureRepr:
    """A claim that did not pass, as pytest reports it: the first line (claim, verdict, reason) is the
    crash message; the evidence lines follow in the full report and in JUnit's failure text."""

    def __init__(self, lines: list[str], path):
        self.lines = lines
        self.reprcrash = _Crash(str(path), 0, lines[0])

    def toterminal(self, tw) -> None:
        for line in self.lines:
            tw.line(line)

    def __str__(self) -> str:
        return "\n".join(self.lines)


class ClaimItem(pytest.Item):
    """One claim on one checkpoint. The checkpoint is loaded once and shared by its items."""

    def __init__(self, *, claim: str, given: str, **kwargs):
        super().__init__(**kwargs)
        self.claim = claim
        self.given = given  # the path as given on the command line

    def _result(self) -> dict:
        """This claim's result. The first item of a checkpoint runs every selected claim of that checkpoint
        (``reports.verify.verify``, side by side with ``--assignadd-jobs`` > 1); later items read theirs."""
        runs = self.config.stash.setdefault(_RUNS, {})
        key = str(self.path)
        if key not in runs:
            from .verify import verify

            opt = self.config.getoption
            ids = list(
                dict.fromkeys(
                    it.claim for it in self.session.items if isinstance(it, ClaimItem) and str(it.path) == key
                )
            )
            try:
                if not self.path.exists():
                    missing = " (the bundled reference checkpoint is missing)" if self.given == "reference" else ""
                    raise ValueError(f"{self.path}: no such file{missing}")
                v = verify(
                    self.path,
                    only=ids,
                    seed=opt("assignadd_seed"),
                    n=opt("assignadd_n"),
                    device=opt("assignadd_device"),
                    task={"f": opt("assignadd_f"), "r": opt("assignadd_r"), "seed": opt("assignadd_split_seed")},
                    jobs=opt("assignadd_jobs"),
                    interfaces=False,
                )
                runs[key] = {c["claim"]: c for c in v.report["claims"]}
            except ValueError as e:  # CheckpointError included
                runs[key] = e
        got = runs[key]
        if isinstance(got, Exception):
            raise got
        return got[self.claim]

    def runtest(self):
        result = self._result()
        self.user_properties.append(("verdict", result["verdict"]))
        if result["verdict"] != "pass":
            raise ClaimFailed(result)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClaimFailed):
            from .render import evidence_lines

            r = excinfo.value.result
            reason = (r["reason"] or "").splitlines()
            lines = [f"{r['claim']} ({r['spec']}): {r['verdict']}: {reason[0] if reason else ''}", *reason[1:]]
            for e in r.get("evidence") or []:
                lines += evidence_lines(e)
            return ClaimFailureRepr(lines, self.path)
        if isinstance(excinfo.value, ValueError):
            return ClaimFailureRepr([f"cannot load the checkpoint: {excinfo.value}"], self.path)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.name
