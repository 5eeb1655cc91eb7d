"""``assignadd-verify``: run every registered claim on a checkpoint and report which hold and why.

The command parses and checks its flags, calls ``reports.verify.verify`` (the one way a checkpoint becomes
verdicts) and renders what it returns. Options, exit status (0 every claim run passed, 1 not, 2 bad input)
and the report files: docs/reports.md. The same checkpoint and flags give a byte-identical report.json.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import reference_checkpoint
from ..cli_util import Parser, Progress, check_at_least, check_writable, checkpoint_arg_problem, exit_bad_input
from ..cli_util import read_json, write_folder_or_exit
from ..model.components import Components
from .population import checkpoints_given, verify_many
from .verify import DEFAULT_N


def _parser() -> Parser:
    p = Parser(
        prog="assignadd-verify",
        description="Run the paper's claims (SPEC §4) as falsifiable tests on a checkpoint and report the verdicts.",
        epilog="Exit status: 0 every claim run passed, 1 a claim failed, was inconclusive or errored, 2 bad input "
        "or usage. A bare TransformerLens state dict holds no task: the claims run on the paper's (f 0.7, r 1, "
        "split seed 42) unless --f, --r or --split-seed say otherwise. Every option: docs/reports.md.",
    )
    p.add_argument("checkpoint", nargs="*", help="checkpoint file(s), or a folder of runs (default: the reference)")
    p.add_argument("--only", metavar="ID,...", help="comma-separated claim ids to run (default: all registered)")
    p.add_argument("--out", metavar="DIR", help="write report.json, report.md, report.html, junit.xml, timings.json")
    p.add_argument("--json", metavar="PATH", help="write report.json to PATH")
    p.add_argument("--junit", metavar="PATH", help="write the JUnit XML to PATH")
    p.add_argument("--seed", type=int, default=0, help="seed for pools and resampling (default 0)")
    p.add_argument("--n", type=int, help=f"pool size (default {DEFAULT_N}; with --claim-doc, the document's)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device to run on (default cpu)")
    p.add_argument("--f", type=float, help="the task's training fraction, if the checkpoint records none (paper 0.7)")
    p.add_argument("--r", type=float, help="the task's 2-var keep-probability, if none recorded (paper 1.0)")
    p.add_argument("--split-seed", type=int, help="the seed of the held-out pair split, if none recorded (paper 42)")
    p.add_argument("--jobs", type=int, metavar="N", help="worker processes for the claims (default: one per core)")
    p.add_argument("--components", metavar="prev=L.H,fetch=L.H,mlp=L", help="where the roles sit (L.H+L.H: two heads)")
    p.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    p.add_argument("--explain", metavar="CLAIM", help="print the claim as data (a JSON document) and exit")
    p.add_argument("--claim-doc", metavar="FILE", help="run the claim an --explain document describes, with its bars")
    return p


def _checked(args) -> tuple[list[str] | None, dict | None, Components | None]:
    """(``--only`` as a list, the ``--claim-doc`` JSON, ``--components``), after every check that needs no
    torch: flags, the checkpoints' paths and first bytes (``args.checkpoint`` becomes the list of files to
    verify, a folder of runs their final checkpoints), the outputs' folders. Exit 2 on the first problem."""
    check_at_least(
        ("--n", args.n, 1, "a positive pool size"),
        ("--seed", args.seed, 0, "non-negative"),
        ("--jobs", args.jobs, 1, "a positive number of processes"),
    )
    only = None if args.only is None else list(dict.fromkeys(s.strip() for s in args.only.split(",") if s.strip()))
    if only == []:
        exit_bad_input("--only needs at least one claim id")
    try:
        components = Components.parse(args.components) if args.components is not None else None
    except ValueError as e:
        exit_bad_input(str(e))
    if args.explain is not None:
        if args.checkpoint or args.claim_doc is not None:
            exit_bad_input("--explain prints a claim and reads no checkpoint or document; give it alone")
        return only, None, components
    if not args.checkpoint and not reference_checkpoint().exists():
        exit_bad_input(
            f"the bundled reference checkpoint is missing ({reference_checkpoint()}); pass a checkpoint path"
        )
    args.checkpoint = checkpoints_given(args.checkpoint)  # a folder of runs: their final checkpoints
    for problem in filter(None, map(checkpoint_arg_problem, args.checkpoint)):
        exit_bad_input(problem)
    if len(args.checkpoint) > 1 and (args.junit or args.claim_doc):
        exit_bad_input(f"--junit and --claim-doc take one checkpoint; {len(args.checkpoint)} were given")
    for flag in filter(lambda flag: getattr(args, flag[2:]), ("--json", "--junit", "--out")):
        check_writable(Path(getattr(args, flag[2:])), flag, want_dir=flag == "--out")
    return only, read_json(args.claim_doc, "--claim-doc") if args.claim_doc is not None else None, components


def run(args) -> int:
    """The command on parsed ``args``: ``--explain``, or the claims (under ``--claim-doc``'s bars)."""
    t_start = time.perf_counter()
    only, doc, components = _checked(args)
    from ..hypotheses import REGISTRY
    from . import render
    from .claim_document import claim_document, running
    from .verify import claim_ids, verify

    if args.explain is not None:
        if args.explain not in REGISTRY:
            exit_bad_input(f"--explain: unknown claim id {args.explain!r}; known: {', '.join(REGISTRY)}")
        sys.stdout.write(render.dumps(claim_document(args.explain, n=args.n or DEFAULT_N)))
        return 0
    if len(args.checkpoint) > 1:
        return verify_many(args, [Path(p) for p in args.checkpoint], only, components)
    path = Path(args.checkpoint[0]) if args.checkpoint else reference_checkpoint()
    task, progress = {"f": args.f, "r": args.r, "seed": args.split_seed}, None
    try:
        with running(doc, args.claim_doc, only, args.n) as (only, n, documents):
            progress = Progress(len(claim_ids(only)), "claim", args.quiet)
            v = verify(
                path, only=only, seed=args.seed, n=n or DEFAULT_N, device=args.device, task=task, jobs=args.jobs,
                components=components, shown_path=str(path), documents=documents,
                figures=bool(args.out), on_result=lambda i, cid, r, s: progress.done(i, cid, r["verdict"], s),
            )  # fmt: skip
    except ValueError as e:  # a checkpoint, task or document that does not fit (CheckpointError, DocumentError)
        exit_bad_input(str(e))
    finally:
        if progress is not None:
            progress.close()
    return _write(args, v, t_start)


def _write(args, v, t_start) -> int:
    """The table on stdout, then the files asked for, each whole or not at all; the exit status."""
    from ..fileio import atomic_write
    from . import render

    print(render.terminal_table(v.report, v.located.to_dict() if v.located is not None else None), end="", flush=True)
    if args.json:
        atomic_write(args.json, render.dumps(v.report))
    figures = v.figures()
    v.timings["total_seconds"] = time.perf_counter() - t_start
    if args.junit:
        atomic_write(args.junit, render.junit_xml(v.report, v.timings))
    if args.out:
        write_folder_or_exit(args.out, render.report_files(v.report, figures, v.timings))  # whole or not at all
        if not args.quiet:
            where = Path(args.out) / "report.html"
            print(f"report written to {where} (and report.json, report.md, junit.xml, timings.json)", file=sys.stderr)
    return 0 if v.report["summary"]["all_passed"] else 1


def main(argv: list[str] | None = None) -> int:
    """The command (``argv`` None: ``sys.argv``, run as ``assignadd-verify``)."""
    try:
        return run(_parser().parse_args(sys.argv[1:] if argv is None else list(argv)))
    except SystemExit as e:  # argparse usage errors and exit_bad_input: 2; --help: 0
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
