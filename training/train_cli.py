"""``assignadd-train RUN_DIR``: train the paper's model (SPEC §3), or a variant of it, resumable."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from ..cli_util import Parser, exit_bad_input, folder_arg_problem
from .config import TrainConfig, TrainError, read_run_json

EPILOG = """progress bar: at each evaluation (--eval-every), the loss of the last batch and the accuracy
on four pools of --eval-size sequences (docs/spec.md §1.4):
  label  pool               sequences
  0varh  0var_heldout_pair  0-var (constant operands), held-out number pairs
  1varh  1var_heldout_pair  1-var, held-out pairs
  2varh  2var_heldout_pair  2-var, held-out pairs
  2varr  2var_restricted_2  2-var, training pairs, each variable in a slot training never shows it in
Every pool's accuracy is logged in RUN_DIR/metrics.jsonl."""


def add_run_options(p: argparse.ArgumentParser, *, checkpoint_every: int) -> None:
    """The options of one training run that ``assignadd-train`` and ``assignadd-sweep`` (for every point)
    share: device, precision, batch, evaluations and checkpoints."""
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    p.add_argument(
        "--precision",
        default="auto",
        help="auto: time fp32 and bf16 autocast on this machine (about a second, once per run) "
        "and keep fp32 unless bf16 is 1.15x faster and numerically safe; fp32 or bf16: as "
        "given (default %(default)s)",
    )
    p.add_argument("--batch-size", type=int, default=512, help="sequences per step (default %(default)s)")
    p.add_argument("--eval-every", type=int, default=100, help="steps between evaluations (default %(default)s)")
    p.add_argument(
        "--eval-size", type=int, default=500, help="sequences per pool at each evaluation (default %(default)s)"
    )
    p.add_argument(
        "--checkpoint-every", type=int, default=checkpoint_every, help="steps between checkpoints (default %(default)s)"
    )


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="assignadd-train",
        description="Train the paper's 2-layer transformer on the assign-and-add task.\nStarted again with "
        "the same RUN_DIR, a run continues from its last checkpoint.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", help="run folder (created; an existing one is resumed)")
    p.add_argument("--seed", type=int, default=42, help="run seed: initialisation and batch order (default 42)")
    p.add_argument("--f", type=float, default=0.7, help="fraction of number pairs in training (default 0.7)")
    p.add_argument("--r", type=float, default=1.0, help="keep-probability of 2-var rows (default 1.0)")
    p.add_argument("--steps", type=int, default=40_000, help="optimizer steps (default 40000, as the paper)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate, constant (default %(default)g)")
    p.add_argument("--weight-decay", type=float, default=0.02, help="AdamW weight decay (default %(default)g)")
    add_run_options(p, checkpoint_every=100)
    arch = p.add_argument_group(
        "architecture and task (defaults: the paper's; other values train a variant, SPEC §2.1)"
    )
    arch.add_argument("--n-layers", type=int, default=2, help="transformer blocks (default %(default)s)")
    arch.add_argument("--n-heads", type=int, default=1, help="attention heads per block (default %(default)s)")
    arch.add_argument("--d-model", type=int, default=128, help="residual stream width (default %(default)s)")
    arch.add_argument("--d-head", type=int, default=None, help="width of each head (default: d_model / n_heads)")
    arch.add_argument("--d-mlp", type=int, default=None, help="MLP hidden width (default: 4 d_model)")
    arch.add_argument(
        "--mlp-layers",
        type=mlp_layers_arg,
        default=None,
        help="blocks whose MLP computes: comma-separated 0-based indices, 'all' or 'none' "
        "(default: the last block only, as the paper's Layer 2)",
    )
    arch.add_argument(
        "--layernorm", action="store_true", help="pre-LayerNorm blocks and a final LayerNorm (the paper has none)"
    )
    arch.add_argument("--modulus", type=int, default=59, help="numbers 0..modulus-1, answers mod it (default 59)")
    arch.add_argument("--n-vars", type=int, default=12, help="variables a, b, ... (3..26, default 12)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: measured at start, about half a second: 1 thread against every "
        "usable core on the run's own step, more only if 1.15x faster; a resumed run keeps its choice)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def mlp_layers_arg(text: str) -> tuple[int, ...] | str:
    """``--mlp-layers``: ``"0,2"`` -> (0, 2); ``"none"`` -> (); ``"all"`` stays ``"all"`` until the number
    of layers is known."""
    text = text.strip().lower()
    if text in ("all", "none"):
        return () if text == "none" else "all"
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated layer indices, 'all' or 'none', got {text!r}"
        ) from None


def check_run_dir(run_dir) -> None:
    """Exit 2 when ``run_dir`` cannot hold a run (a file, or under one; not writable) or holds a
    ``run.json`` that is not a JSON object, before torch is imported. Opening the run checks the rest:
    its settings against the options (``training.train.open_run``)."""
    problem = folder_arg_problem(Path(run_dir))
    if problem is not None:
        exit_bad_input(problem)
    run_json = Path(run_dir) / "run.json"
    try:
        read_run_json(run_json)
    except TrainError as e:
        exit_bad_input(str(e))
    except OSError as e:
        exit_bad_input(f"{run_json}: cannot read ({e.strerror or e})")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    check_run_dir(args.run_dir)
    # each option (but RUN_DIR and --quiet) is the TrainConfig field of its name; "all" needs --n-layers
    options = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    if args.mlp_layers == "all":
        options["mlp_layers"] = tuple(range(max(args.n_layers, 0)))
    cfg = TrainConfig(**options)
    try:
        cfg.validate()  # before torch is imported: a bad option is answered at once
        from .train import train

        final = train(args.run_dir, cfg, progress=not args.quiet)
    except TrainError as e:
        exit_bad_input(str(e))
    except KeyboardInterrupt:
        print(f"interrupted; run `assignadd-train {args.run_dir}` with the same options to resume", file=sys.stderr)
        return 130
    print(f"final checkpoint: {final}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
