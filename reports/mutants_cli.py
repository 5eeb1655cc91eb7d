"""``assignadd-mutants``: mutation testing of the claims on a checkpoint.

Builds each component mutant of the checkpoint (``interventions/mutants.py``), runs every claim on it and
prints the claim x mutant matrix, each cell marked against the expected pattern of SPEC §6
(docs/hypotheses.md). Exit status: 0 every judged cell as expected; 1 a judged cell is not; 2 bad input.

With ``--calibrate`` it measures, over one or more checkpoints, each claim's power, false-alarm rate and
interval coverage (``hypotheses/calibration.py``, docs/calibration.md) and prints that table instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cli_util import Parser, check_writable, checkpoint_arg_problem, exit_bad_input
from ..fileio import atomic_write, sha256_file


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="assignadd-mutants",
        description="Break one component of a checkpoint at a time and check that each claim's verdict "
        "follows: the broken component's claim fails, every claim upstream of it passes.",
        epilog="Exit status: 0 every judged cell as expected (and at least one judged), 1 a judged cell is not or "
        "none could be judged, 2 bad input or usage. With --calibrate: 0 once the table is measured (it is a "
        "measurement, not a test), 2 bad input or usage.",
    )
    p.add_argument(
        "checkpoint",
        nargs="*",
        help="checkpoint file, either format (default: the bundled reference checkpoint); several only "
        "with --calibrate",
    )
    p.add_argument("--mutants", metavar="NAME,...", help="comma-separated mutant names (default: all)")
    p.add_argument("--only", metavar="ID,...", help="comma-separated claim ids (default: all registered)")
    p.add_argument("--seed", type=int, default=0, help="seed for the mutants, pools and resampling (default 0)")
    p.add_argument("--n", type=int, default=1000, help="evaluation pool size per claim (default 1000)")
    p.add_argument("--json", metavar="PATH", help="write the matrix as JSON")
    p.add_argument("--md", metavar="PATH", help="write the matrix as Markdown")
    p.add_argument("--html", metavar="PATH", help="write a self-contained HTML page with the matrix as a figure")
    p.add_argument(
        "--judged-only",
        action="store_true",
        help="on a break mutant, run only the claims whose cell is judged (leaves out the claims downstream "
        "of the break, shown as —; --calibrate always does); the verdict of the matrix is the same",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    cal = p.add_argument_group("calibration (docs/calibration.md)")
    cal.add_argument(
        "--calibrate",
        action="store_true",
        help="per claim over the checkpoints given: power (its own breaks it fails), false alarms (fails on "
        "breaks downstream of it, on symmetry mutants and on small-noise copies) and interval coverage",
    )
    cal.add_argument("--noise-copies", type=int, default=3, help="small-noise copies per checkpoint (default 3)")
    cal.add_argument(
        "--coverage-seeds", type=int, default=3, help="pool seeds whose intervals coverage checks (default 3)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
        return _main(args)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def _known(text: str | None, known, what: str) -> list[str] | None:
    """A comma-separated option's names (None when not given), each one of ``known``, else exit 2."""
    names = text.split(",") if text else None
    unknown = [x for x in names or [] if x not in known]
    if unknown:
        exit_bad_input(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def _check_input(args) -> list[Path]:
    """Exit 2 on options that contradict each other, a checkpoint that cannot be one or an output that
    cannot be written, before torch is imported; returns the checkpoints' paths. Loading each checkpoint
    checks the rest of it."""
    import assignadd

    if args.n < 10:
        exit_bad_input(f"--n {args.n} is too small to decide anything (at least 10)")
    if len(args.checkpoint) > 1 and not args.calibrate:
        exit_bad_input("several checkpoints are only taken with --calibrate")
    if args.calibrate and args.html:
        exit_bad_input("--html is not available with --calibrate (use --md or --json)")
    if args.noise_copies < 0 or args.coverage_seeds < 1:
        exit_bad_input("--noise-copies must be >= 0 and --coverage-seeds >= 1")
    paths = [Path(c) for c in args.checkpoint] or [assignadd.reference_checkpoint()]
    for path in paths:
        problem = checkpoint_arg_problem(path)
        if problem is not None:
            exit_bad_input(problem)
    for given, flag in ((args.json, "--json"), (args.md, "--md"), (args.html, "--html")):
        if given:
            check_writable(Path(given), flag, want_dir=False)
    return paths


def _main(args) -> int:
    paths = _check_input(args)
    from ..hypotheses import REGISTRY
    from ..hypotheses.mutation import matrix_to_dict, mutation_matrix, render_matrix
    from .mutation_page import matrix_html
    from ..interventions.mutants import MUTANTS
    from ..model import CheckpointError
    from ..hypotheses.session import load_context

    names, only = _known(args.mutants, MUTANTS, "mutant(s)"), _known(args.only, REGISTRY, "claim id(s)")
    contexts = {}
    for path in paths:
        try:
            contexts[str(path)], _, _ = load_context(path, seed=args.seed, n=args.n, device="cpu")
        except (CheckpointError, ValueError) as e:
            exit_bad_input(str(e))
    for path, ctx in contexts.items():
        for name in names or []:
            if (why := MUTANTS[name].applies(ctx.model)) is not None:
                exit_bad_input(f"{name} cannot be made of {path}: {why}")
    if args.calibrate:
        return _calibrate(args, contexts, names, only)
    path, ctx = paths[0], contexts[str(paths[0])]
    progress = None if args.quiet else (lambda name: print(f"mutant {name} ...", file=sys.stderr, flush=True))
    matrix = mutation_matrix(
        ctx.model,
        ctx.task,
        seed=args.seed,
        n=args.n,
        mutants=names,
        claims=only,
        progress=progress,
        judged_only=args.judged_only,
    )
    doc = matrix_to_dict(matrix)
    _write(args, doc, render_matrix)
    if args.html:
        atomic_write(args.html, matrix_html(doc, str(path)))
    print(render_matrix(doc))
    # Nothing judged (every claim already fails on the unbroken checkpoint) proves nothing: not a pass.
    return 0 if doc["summary"]["judged"] and not doc["summary"]["wrong"] else 1


def _calibrate(args, contexts: dict, names, only) -> int:
    from ..hypotheses.calibration import calibrate, render_calibration

    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    doc = calibrate(
        [(label, ctx.model) for label, ctx in contexts.items()],
        lambda label: contexts[label].task,
        seed=args.seed,
        n=args.n,
        noise_copies=args.noise_copies,
        coverage_seeds=args.coverage_seeds,
        claims=only,
        mutants=names,
        progress=progress,
    )
    doc["sha256"] = {label: sha256_file(label) for label in contexts}  # which files the table is about
    _write(args, doc, render_calibration)
    print(render_calibration(doc))
    return 0


def _write(args, doc: dict, render) -> None:
    """``--json`` and ``--md``, where given: the document, and ``render(doc, markdown=True)``."""
    if args.json:
        atomic_write(args.json, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if args.md:
        atomic_write(args.md, render(doc, markdown=True))


if __name__ == "__main__":
    sys.exit(main())
