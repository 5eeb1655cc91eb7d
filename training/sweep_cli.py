"""``assignadd-sweep``: train a grid of f or r (SPEC §1.3, §4.5) into one resumable sweep folder."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from ..cli_util import Parser, exit_bad_input, folder_arg_problem
from .config import TrainError
from .grid import SweepConfig, SweepError
from .train_cli import add_run_options

EPILOG = """examples:
  assignadd-sweep --param f --values 0.1,0.15,0.2,0.25,0.3,0.4,0.5,0.7 --steps 20000 --early-stop 3 \\
      --jobs 2 --out runs/sweep_f
  assignadd-sweep --param r --values 0.05,0.1,0.15,0.2,0.3,0.5,1.0 --steps 20000 --early-stop 3 --out runs/sweep_r
Started again with the same options, a sweep skips finished points and resumes the others.
Recipes and the early-stop rule: docs/sweeps.md."""


def _comma_separated(cast, kind: str, one: str):
    """An argparse ``type``: ``"a,b,c"`` as a non-empty list of ``cast`` values (``kind``: what they are,
    plural; ``one``: what one of them is, for the message when there are none)."""

    def parse(text: str) -> list:
        try:
            values = [cast(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind}, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {one}")
        return values

    return parse


_floats = _comma_separated(float, "numbers", "value")
_ints = _comma_separated(int, "integers", "seed")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="assignadd-sweep",
        description="Train a grid of f or r (SPEC §1.3, §4.5) into one resumable "
        "sweep folder: one ordinary run folder per (value, seed).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--param",
        required=True,
        choices=("f", "r"),
        help="f: fraction of number pairs in training; r: keep-probability of 2-var rows",
    )
    p.add_argument("--values", required=True, type=_floats, help="grid values, comma-separated (e.g. 0.1,0.2,0.3)")
    p.add_argument("--seeds", type=_ints, default=[0], help="run seeds, comma-separated (default 0)")
    p.add_argument("--out", required=True, help="sweep folder (created; an existing one is continued)")
    p.add_argument("--steps", type=int, default=20_000, help="steps per point (default 20000)")
    p.add_argument(
        "--early-stop",
        type=int,
        default=0,
        metavar="K",
        help="stop a point once its metric is >= 0.97 at K consecutive evaluations (default 0: off)",
    )
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="(default %(default)s)")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="local: worker processes, one torch thread each (1: one point at a time, in this process, on the "
        "threads each point measures, as assignadd-train); ray: CPUs of a local Ray instance (default %(default)s)",
    )
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start a local one)")
    p.add_argument("--f", type=float, default=None, help="f of every point when sweeping r (default 0.7)")
    p.add_argument("--r", type=float, default=None, help="r of every point when sweeping f (default 1.0)")
    add_run_options(p, checkpoint_every=1000)  # 100, as assignadd-train, would be ~200 MB per 20k-step point
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def check_out(out) -> None:
    """Exit 2 when ``out`` cannot hold this sweep (a file, or under one; not writable; a folder that is
    not empty and holds no ``sweep.json``), before torch is imported. Starting the sweep checks the rest
    (``training.sweep_folder.check_out_folder``, and its grid against the options)."""
    out = Path(out)
    problem = folder_arg_problem(out)
    if problem is not None:
        exit_bad_input(problem)
    if out.is_dir() and not (out / "sweep.json").exists() and any(out.iterdir()):
        exit_bad_input(f"{out}: exists, is not empty and holds no sweep.json; use another --out")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, args.param) is not None:
        exit_bad_input(f"--{args.param} is the swept parameter; give its values with --values")
    check_out(args.out)
    # each option but --out, --f and --r (the fixed one is ``fixed``) and how the points run (--backend, --jobs,
    # --ray-address, --quiet) is the SweepConfig field of its name
    options = {f.name: getattr(args, f.name) for f in fields(SweepConfig) if hasattr(args, f.name)}
    cfg = SweepConfig(**options, fixed=args.r if args.param == "f" else args.f)
    try:
        cfg.validate()  # before torch is imported: a bad option is answered at once
        from .sweep import run_sweep

        summary = run_sweep(
            args.out, cfg, backend=args.backend, jobs=args.jobs, ray_address=args.ray_address, progress=not args.quiet
        )
    except (SweepError, TrainError) as e:
        exit_bad_input(str(e))
    except KeyboardInterrupt:
        print(f"interrupted; run the same command again to resume the sweep in {args.out}", file=sys.stderr)
        return 130
    if not args.quiet:
        for s in summary:
            print(f"{s['point']}: {s['status']} at step {s['step']}")
    print(f"sweep folder: {args.out} ({len(summary)} points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
