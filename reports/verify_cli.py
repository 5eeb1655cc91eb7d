"""``assignadd-verify``: run every registered claim on a checkpoint and report which hold and why.

Options, exit status (0 every claim run passed, 1 not, 2 bad input) and the report files: docs/reports.md.
The same checkpoint and flags give a byte-identical report.json; run times go to timings.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from ..cli_util import Parser, check_writable, checkpoint_arg_problem, exit_bad_input

DEFAULT_N = 2000
# Claims about more than one checkpoint: what each kind needs, and the command that runs it.
NOT_HERE = {
    "series": ("a checkpoint series (a training run's folder)", "assignadd-report RUN_DIR"),
    "sweep": (
        "a sweep over f or r (a grid of training runs)",
        "assignadd-sweep --param f|r --values ... --out SWEEP_DIR, then assignadd-report SWEEP_DIR",
    ),
}


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="assignadd-verify",
        description="Run the paper's claims (SPEC §4) as falsifiable tests on a checkpoint and report the verdicts.",
        epilog="Exit status: 0 every claim run passed, 1 a claim failed, was inconclusive or errored, 2 bad input "
        "or usage. A bare TransformerLens state dict holds no task: the claims run on the paper's "
        "(f 0.7, r 1, split seed 42) unless --f, --r or --split-seed say otherwise.",
    )
    p.add_argument(
        "checkpoint",
        nargs="?",
        default=None,
        help="checkpoint file, either format of SPEC §2.4 (default: the bundled reference checkpoint)",
    )
    p.add_argument("--only", metavar="ID,...", help="comma-separated claim ids to run (default: all registered)")
    p.add_argument("--out", metavar="DIR", help="write report.json, report.md, report.html, junit.xml, timings.json")
    p.add_argument("--json", metavar="PATH", help="write report.json to PATH")
    p.add_argument("--junit", metavar="PATH", help="write the JUnit XML to PATH")
    p.add_argument("--seed", type=int, default=0, help="seed for pools and resampling (default 0)")
    p.add_argument(
        "--n",
        type=int,
        default=None,
        help=f"evaluation pool size (default {DEFAULT_N}; with --claim-doc, the document's pool_size)",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device to run on (default cpu)")
    for flag, kind, what, paper in (  # the task, for a checkpoint that does not record it
        ("--f", float, "the task's training fraction f", 0.7),
        ("--r", float, "the task's 2-var keep-probability r", 1.0),
        ("--split-seed", int, "the seed of the train/held-out pair split", 42),
    ):
        help_ = f"{what}, for a checkpoint that does not record it (paper: {paper})"
        p.add_argument(flag, type=kind, default=None, help=help_)
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="claims run side by side in N forked worker processes, one torch thread each (default: "
        "one per usable core; 1 where fork is unavailable or on CUDA); the report does not "
        "depend on N",
    )
    p.add_argument(
        "--components",
        metavar="prev=L.H,fetch=L.H,mlp=L",
        help="where the previous-token head, the fetching head and the adding MLP sit (layers and heads "
        "from 0), instead of the pre-registered search of SPEC §2.1; the report says they were given",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    p.add_argument(
        "--explain",
        metavar="CLAIM",
        help="print the claim as data (a JSON document, schema assignadd.claim-doc/1: statement, controls, "
        "and per item the statistic, site, intervention, bar with its reason) and exit; no checkpoint is read",
    )
    p.add_argument(
        "--claim-doc",
        metavar="FILE",
        help="run the claim a document of --explain describes, with the document's bars and required "
        "items (what is measured must still be what the code declares)",
    )
    return p


def explain(cid: str, n: int) -> int:
    from ..hypotheses import REGISTRY
    from .claim_document import claim_document
    from .render import dumps

    if cid not in REGISTRY:
        exit_bad_input(f"--explain: unknown claim id {cid!r}; known: {', '.join(REGISTRY)}")
    sys.stdout.write(dumps(claim_document(cid, n=n)))
    return 0


def _read_claim_doc(path_text: str):
    """The JSON of ``--claim-doc`` (standard library only: read before anything heavy is imported)."""
    import json

    path = Path(path_text)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        exit_bad_input(f"--claim-doc {path}: no such file")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        exit_bad_input(f"--claim-doc {path}: not a JSON document ({type(e).__name__}: {e})")


def _use_claim_doc(path_text: str, doc, only: list[str] | None, n: int | None) -> tuple[list[str], dict]:
    """Check the document ``doc`` read from ``--claim-doc``, put the claim it describes in the registry's
    place, and return (the claim to run, the document)."""
    from ..hypotheses import REGISTRY
    from .claim_document import DocumentError, documented

    path = Path(path_text)
    try:
        claim = documented(doc)
    except DocumentError as e:
        exit_bad_input(f"--claim-doc {path}: {e}")
    if n is not None and n != doc["pool_size"]:
        exit_bad_input(
            f"--claim-doc {path}: the document states its statistics for pools of {doc['pool_size']}; --n {n} differs"
        )
    if only is not None and only != [claim.id]:
        exit_bad_input(f"--claim-doc describes {claim.id}; --only {','.join(only)} asks for other claims")
    REGISTRY[claim.id] = claim  # this process runs the document's claim (forked workers inherit it)
    return [claim.id], doc


def _check_paths(args):
    """Exit 2 on a checkpoint that cannot be one, a claim document that is not JSON, or an output that
    cannot be written: before torch is imported, so this is answered at once. Returns the claim
    document's JSON (None without ``--claim-doc``). Loading the checkpoint checks the rest of it."""
    if args.checkpoint is None:
        from .. import reference_checkpoint

        path = reference_checkpoint()
        if not path.exists():
            exit_bad_input(f"the bundled reference checkpoint is missing ({path}); pass a checkpoint path")
    else:
        problem = checkpoint_arg_problem(args.checkpoint)
        if problem is not None:
            exit_bad_input(problem)
    doc = _read_claim_doc(args.claim_doc) if args.claim_doc is not None else None
    for given, flag in ((args.json, "--json"), (args.junit, "--junit"), (args.out, "--out")):
        if given:
            check_writable(Path(given), flag, want_dir=flag == "--out")
    return doc


def not_run_here(only: list[str] | None) -> list[dict]:
    """The claims this command cannot run on one checkpoint (series and sweep claims), each with what it
    needs and the command that runs it; none when ``--only`` chose the claims."""
    from ..hypotheses.data_requirements import SWEEP_REGISTRY
    from ..hypotheses.learning_phases import SERIES_REGISTRY

    if only is not None:
        return []
    out = []
    for kind, registry in (("series", SERIES_REGISTRY), ("sweep", SWEEP_REGISTRY)):
        needs, command = NOT_HERE[kind]
        out += [
            {"claim": cid, "spec": cls.spec, "statement": cls.statement, "needs": needs, "command": command}
            for cid, cls in registry.items()
        ]
    return out


def verify(args) -> int:
    t_start = time.perf_counter()
    if args.n is not None and args.n < 1:
        exit_bad_input(f"--n must be a positive pool size, got {args.n}")
    if args.seed < 0:
        exit_bad_input(f"--seed must be non-negative, got {args.seed}")
    if args.jobs is not None and args.jobs < 1:
        exit_bad_input(f"--jobs must be a positive number of processes, got {args.jobs}")
    only = None
    if args.only is not None:
        only = list(dict.fromkeys(s.strip() for s in args.only.split(",") if s.strip()))
        if not only:
            exit_bad_input("--only needs at least one claim id")
    if args.explain is not None and (args.checkpoint is not None or args.claim_doc is not None):
        exit_bad_input("--explain prints a claim and reads no checkpoint or document; give it alone")
    claim_doc = _check_paths(args) if args.explain is None else None
    args.given_components = None
    if args.components is not None:
        from ..hypotheses.locate import parse

        try:
            args.given_components = parse(args.components)
        except ValueError as e:
            exit_bad_input(str(e))
    if args.explain is not None:
        return explain(args.explain, args.n or DEFAULT_N)
    from ..hypotheses import REGISTRY

    documents, registered = {}, dict(REGISTRY)
    try:
        if args.claim_doc is not None:
            only, doc = _use_claim_doc(args.claim_doc, claim_doc, only, args.n)
            documents[doc["claim"]] = doc
            args.n = doc["pool_size"]
        args.n = args.n or DEFAULT_N
        return _verify(args, only, documents, t_start)
    finally:  # a claim put in place by --claim-doc does not outlive the command
        REGISTRY.clear()
        REGISTRY.update(registered)


def _verify(args, only, documents, t_start) -> int:

    from .. import __version__, reference_checkpoint

    if args.checkpoint is None:  # its presence was checked by _check_paths
        path = reference_checkpoint()
        shown_path = str(path)
    else:
        path, shown_path = Path(args.checkpoint), args.checkpoint

    from ..hypotheses import REGISTRY

    if only is not None:
        elsewhere = {c["claim"]: c for c in not_run_here(None)}
        for cid in only:
            if cid in elsewhere and cid not in REGISTRY:
                c = elsewhere[cid]
                exit_bad_input(f"--only {cid}: this claim needs {c['needs']}, not one checkpoint; run: {c['command']}")
        unknown = [i for i in only if i not in REGISTRY]
        if unknown:
            exit_bad_input(f"--only: unknown claim id(s) {', '.join(unknown)}; known: {', '.join(REGISTRY) or 'none'}")
    ids = [i for i in REGISTRY if only is None or i in only]  # registry order, whatever order --only gives

    staging: list[Path] = []
    try:
        return _run(args, path, shown_path, only, ids, staging, t_start, __version__, documents)
    finally:
        for d in staging:
            if d.exists():
                shutil.rmtree(d, ignore_errors=True)


def _run(args, path, shown_path, only, ids, staging_dirs, t_start, version, documents) -> int:
    import torch
    from tqdm import tqdm

    from ..fileio import atomic_write, commit_folder, sha256_file, stage_folder
    from ..hypotheses import interfaces as interface_checks
    from ..hypotheses.locate import LocateError
    from ..hypotheses.session import ClaimRunner, load_context, resolve_jobs
    from . import render
    from .claim_document import claim_documents

    json_path = Path(args.json) if args.json else None
    junit_path = Path(args.junit) if args.junit else None
    out = Path(args.out) if args.out else None

    if args.device == "cuda" and not torch.cuda.is_available():
        exit_bad_input("--device cuda: CUDA is not available on this machine")
    t0 = time.perf_counter()
    try:
        ctx, meta, task_source = load_context(
            path,
            seed=args.seed,
            n=args.n,
            device=args.device,
            task={"f": args.f, "r": args.r, "seed": args.split_seed},
            components=args.given_components,
        )
    except ValueError as e:  # CheckpointError is a ValueError
        exit_bad_input(str(e))
    model, task = ctx.model, ctx.task
    load_seconds, t_locate = time.perf_counter() - t0, time.perf_counter()
    try:  # once, before the workers fork (they inherit it)
        located = ctx.located
    except LocateError:  # a role has no candidate: each claim that needs it says so as an error
        located = None
    locate_seconds = time.perf_counter() - t_locate
    digest = sha256_file(path)
    timings = {"schema": render.TIMINGS_SCHEMA, "load_seconds": load_seconds, "claims": {}}
    timings["locate_seconds"] = locate_seconds

    # Claims run side by side in forked workers: forked first, before this process starts a thread.
    t_claims = time.perf_counter()
    runner = ClaimRunner(ctx, ids, jobs=resolve_jobs(args.jobs, ctx, len(ids))).start()
    timings["jobs"] = runner.jobs
    # Figures are drawn on a worker thread while the claims run (torch releases the GIL in its
    # kernels, so the two overlap on a multi-core CPU): the model figures from a private copy of the
    # model (claims attach temporary hooks to theirs), each claim's evidence plot once it is decided.
    # Figures use explicit generators only, so the overlap cannot change any claim's result.
    painter = figure_jobs = None
    if out is not None:
        import copy
        from concurrent.futures import ThreadPoolExecutor

        from ..model.components import PAPER
        from .figures import claim_figures, model_figures

        painter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assignadd-figures")
        figure_jobs = {
            "model": painter.submit(
                model_figures,
                copy.deepcopy(model).eval(),
                task,
                seed=args.seed,
                components=located.components if located is not None else PAPER,
            ),
            "forest": {},
        }
    # On a terminal, a bar that clears itself; in a log (stderr not a terminal), one finished line per
    # claim, so nothing is left without its newline for the table on stdout to run into.
    interactive = not args.quiet and sys.stderr.isatty()
    try:
        # The interface checks (those naming a claim this run asks about) run here while the workers run
        # the claims: they read the model and the pools only, like a claim.
        t_interfaces = time.perf_counter()
        interfaces = interface_checks.check_all(ctx, claims=ids)
        timings["interfaces_seconds"] = time.perf_counter() - t_interfaces
        by_id = {}
        bar = tqdm(total=len(ids), desc="claims", unit="claim", file=sys.stderr, disable=not interactive, leave=False)
        for i, (cid, result, seconds) in enumerate(runner, 1):
            by_id[cid] = result
            timings["claims"][cid] = seconds
            bar.update(1)
            bar.set_postfix_str(cid)
            if not args.quiet and not interactive:
                print(f"claim {i}/{len(ids)} {cid}: {result['verdict']} ({seconds:.1f} s)", file=sys.stderr, flush=True)
            if painter is not None:
                figure_jobs["forest"][cid] = painter.submit(claim_figures, result)
        bar.close()
    except BaseException:
        runner.close()
        if painter is not None:
            painter.shutdown(wait=False, cancel_futures=True)
        raise
    timings["claims_wall_seconds"] = time.perf_counter() - t_claims
    results = [by_id[c] for c in ids]  # registry order, whichever finished first
    timings["claims"] = {c: timings["claims"][c] for c in ids}

    checkpoint = {
        "path": shown_path,
        "sha256": digest,
        "format": meta.get("format"),
        "step": meta.get("step"),
        "size_bytes": path.stat().st_size,
    }
    if meta.get("step_source"):
        checkpoint["step_source"] = meta["step_source"]
    report = render.build_report(
        checkpoint=checkpoint,
        model_config=model.cfg.to_dict(),
        task=task.config.to_dict(),
        task_source=task_source,
        seed=args.seed,
        n=args.n,
        device=args.device,
        only=only,
        claims=results,
        tool_version=version,
        not_run=not_run_here(only),
        interfaces=interfaces,
    )
    named = located is not None and located.reported  # not on the paper's layout found as such
    if named:
        report = with_components(report, located)
    # each claim run, as data: the document given with --claim-doc, else the registered claim's
    at = located.components if named else None
    undocumented = [c for c in ids if c not in documents]
    report["claim_documents"] = {**claim_documents(undocumented, n=args.n, components=at), **documents}
    report["claim_documents"] = {c: report["claim_documents"][c] for c in ids}
    sys.stdout.write(render.terminal_table(report))
    sys.stdout.flush()

    report_json = render.dumps(report)
    staging = None
    if out is not None:
        try:  # written into a temporary folder, moved in only when complete
            staging = stage_folder(out)
        except OSError as e:
            exit_bad_input(f"--out {out}: cannot write there ({e.strerror or e})")
        staging_dirs.append(staging)
        t2 = time.perf_counter()
        try:
            figures = [f for c in ids for f in figure_jobs["forest"][c].result()]
            figures += figure_jobs["model"].result()
        finally:
            painter.shutdown(wait=False, cancel_futures=True)
        timings["figures_wait_seconds"] = time.perf_counter() - t2  # what the figures add after the claims
        (staging / "report.json").write_text(report_json, encoding="utf-8")
        (staging / "report.md").write_text(render.markdown(report), encoding="utf-8")
        (staging / "report.html").write_text(render.html_page(report, figures), encoding="utf-8")
    if json_path is not None:
        atomic_write(json_path, report_json)
    timings["total_seconds"] = time.perf_counter() - t_start
    junit = render.junit_xml(report, timings)
    if junit_path is not None:
        atomic_write(junit_path, junit)
    if staging is not None:
        (staging / "junit.xml").write_text(junit, encoding="utf-8")
        timings["total_seconds"] = time.perf_counter() - t_start
        (staging / "timings.json").write_text(render.dumps(render.clean_json(timings)), encoding="utf-8")
        commit_folder(staging, out)
        if not args.quiet:
            print(
                f"report written to {out / 'report.html'} (and report.json, report.md, junit.xml, timings.json "
                f"beside it)",
                file=sys.stderr,
            )
    return 0 if report["summary"]["all_passed"] else 1


def with_components(report: dict, located) -> dict:
    """The report with where the components were found (``components``, after ``only``) and, in each
    claim's entry, the components it read (``components``): for a model where that is news (not the
    paper's layout found as the only candidates)."""
    from ..hypotheses.locate import claim_components

    for c in report["claims"]:
        c["components"] = claim_components(located.components, c["claim"])
    out = {}
    for key, value in report.items():
        out[key] = value
        if key == "only":
            out["components"] = located.to_dict()
    return out


def main(argv: list[str] | None = None) -> int:
    """The command (``argv`` None: ``sys.argv``, run as ``assignadd-verify``)."""
    args_list = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(args_list)
        return verify(args)
    except SystemExit as e:  # argparse usage errors and exit_bad_input: 2; --help: 0
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
