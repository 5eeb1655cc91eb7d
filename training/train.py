"""Training (SPEC §3): AdamW on the last position's cross-entropy, seeded and resumable.

A run folder holds:
    run.json          the run's config (training, task, model), its precision choice (which
                      arithmetic, and why: ``training/precision.py``) and its thread choice (how many
                      torch threads, and why: ``training/threads.py``), written once
    checkpoints/      step_000000.pt, step_000100.pt, ...: weights after N optimizer steps
    metrics.jsonl     one line per evaluation: step, training loss, every pool's accuracy
    resume.pt         the latest weights and optimizer state (rewritten atomically)
    final.pt          the weights after the last step

Every batch is a pure function of (run seed, step) and the optimizer state is saved with the weights,
so a run killed mid-way and started again with the same folder ends with the same weights. A resumed
run keeps the precision and the threads it started with (recorded in ``run.json``), whatever a measurement
would pick now (``--threads N`` given again overrides the recorded threads: the thread count does not change
the run's bits).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..data import POOL_NAMES, Task
from ..fileio import atomic_write
from ..model.checkpoint import atomic_save, save_checkpoint
from ..model.transformer import AssignAddTransformer
from .config import TrainConfig, TrainError, read_run_json
from .fast_forward import last_logits
from .precision import SCOUT_BATCH, PrecisionChoice, StepProbe, choose_precision
from .threads import ThreadChoice, choose_threads, recorded_threads, torch_threads, usable_cores

RUN_FORMAT = "assignadd.run/1"
KEY_POOLS = ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair", "2var_restricted_2")


@torch.no_grad()
def accuracy(model: AssignAddTransformer, tokens: torch.Tensor, labels: torch.Tensor, batch: int = 4096) -> float:
    """Fraction of sequences whose last-position argmax is the label (fp32, fast path)."""
    correct = 0
    dev = next(model.parameters()).device
    for i in range(0, len(tokens), batch):
        logits = last_logits(model, tokens[i : i + batch].to(dev))
        correct += (logits.argmax(-1).cpu() == labels[i : i + batch]).sum().item()
    return correct / len(tokens)


def adamw(params, cfg: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas)


def training_step(
    model: AssignAddTransformer,
    opt: torch.optim.Optimizer,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    *,
    device: str,
    bf16: bool,
    biases: bool,
) -> torch.Tensor:
    """One optimizer step of SPEC §3 on ``tokens (B, T)``, ``labels (B,)``, moved to ``device``: the
    fast-path forward (under bf16 autocast if ``bf16``), cross-entropy at the last position in fp32,
    backward, AdamW. Returns the loss; the step's gradients stay on the parameters. The step ``train``
    runs, and the one ``training.precision`` times."""
    with torch.autocast("cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = last_logits(model, tokens.to(device), biases=biases)  # (B, d_vocab_out)
    loss = F.cross_entropy(logits.float(), labels.to(device))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def step_probe(cfg: TrainConfig, task: Task) -> StepProbe:
    """``training_step`` as ``training.precision`` times it: a fresh model of the run's seed on the run's
    own batches (the first one is the run's first step), at a scout batch and at the run's batch."""
    model_cfg = cfg.model_config(task)
    batch = {"scout": min(SCOUT_BATCH, cfg.batch_size), "workload": cfg.batch_size}

    def make(precision: str, size: str):
        model = AssignAddTransformer(model_cfg, seed=cfg.seed).to(cfg.device)
        opt = adamw(model.trainable_parameters, cfg)
        biases = not model.biases_are_zero()
        steps = itertools.count()

        def step():
            tokens, labels = task.training_batch(cfg.seed, next(steps), batch[size])
            loss = training_step(model, opt, tokens, labels, device=cfg.device, bf16=precision == "bf16", biases=biases)
            return loss.item(), [p.grad for p in model.trainable_parameters if p.grad is not None]

        return step

    return StepProbe(make, **{size: {"step": "train", "models": 1, "batch_size": b} for size, b in batch.items()})


def recorded_precision(settings: dict | None) -> str | None:
    """The precision a folder records, from its settings' ``bf16`` (``run.json``'s ``train``,
    ``sweep.json``'s ``grid``); None: no usable record."""
    bf16 = (settings or {}).get("bf16")
    return None if not isinstance(bf16, bool) else ("bf16" if bf16 else "fp32")


def resolve_precision(cfg: TrainConfig, task: Task, header: dict | None = None) -> PrecisionChoice:
    """What ``cfg.precision`` means for this run: as given (fp32, bf16); for ``auto``, the precision an
    existing run folder records (``header``: its run.json), else measured (``training.precision``)."""
    if cfg.precision != "auto":
        return PrecisionChoice.given(cfg.precision)
    recorded = recorded_precision((header or {}).get("train"))
    if recorded is not None:
        reason = f"auto, resumed: run.json records {recorded}, chosen when the run started"
        return PrecisionChoice.kept(recorded, reason)
    return choose_precision(cfg.device, step_probe(cfg, task))


def planned_threads(cfg: TrainConfig, header: dict | None = None) -> ThreadChoice | None:
    """The run's torch threads where nothing needs timing: ``cfg.threads`` as given; the count an existing
    run folder records (``header``: its run.json); one usable core; a run on a GPU (torch's threads). None:
    to be measured (``training.threads.choose_threads``) once the precision is known."""
    if cfg.threads:
        return ThreadChoice.given(cfg.threads)
    recorded = recorded_threads((header or {}).get("threads"))
    if recorded is not None:
        return ThreadChoice.kept(recorded)
    if cfg.device != "cpu":
        return ThreadChoice(torch.get_num_threads(), f"torch's default: the run trains on {cfg.device}", "device")
    if usable_cores() < 2:
        return ThreadChoice(1, "one usable core: nothing to measure", "one core")
    return None


def log_stderr(line: str) -> None:
    """The default ``log`` of ``train`` and ``run_sweep``: one line on standard error."""
    print(line, file=sys.stderr, flush=True)


@dataclass
class OpenRun:
    run_dir: Path
    cfg: TrainConfig  # precision decided: fp32 or bf16
    task: Task
    model: AssignAddTransformer
    opt: torch.optim.Optimizer
    start: int  # the step to continue from: 0 for a new run
    precision: PrecisionChoice
    threads: ThreadChoice


def open_run(run_dir, cfg: TrainConfig, precision: PrecisionChoice | None = None) -> OpenRun:
    """Create the run folder (with ``run.json``) for ``cfg``, or check that an existing one holds the
    same run and load model and optimizer from its ``resume.pt``. Refuses a split that leaves some
    number out of every training pair, a folder of another run, and a resume file it cannot use.

    ``precision``: a choice made by the caller (a sweep decides once for all its points); by default
    ``resolve_precision`` decides, after the options are checked and before anything is written. The
    threads (``planned_threads``, else measured by ``choose_threads`` in the chosen precision) are decided
    after the folder is checked; torch's thread count is left as it was (``train`` applies the choice)."""
    cfg.validate()
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise TrainError(f"{run_dir}: exists and is not a folder")
    task = cfg.task()
    missing = task.numbers_missing_from_training()
    if missing:
        raise TrainError(
            f"f={cfg.f} leaves numbers {missing[:5]}{'...' if len(missing) > 5 else ''} out of every training pair; "
            "the model could never learn them"
        )
    run_json = run_dir / "run.json"
    existing = read_run_json(run_json)
    threads = planned_threads(cfg, existing)
    if precision is None:
        # Timed on the run's threads; on one thread where those are yet to be measured: a core's arithmetic
        # decides the precision, and one thread's timing is the one a machine busy with other work leaves
        # readable (two threads there ran ten times slower, and as erratically).
        with torch_threads(threads.chosen if threads is not None else 1):
            precision = resolve_precision(cfg, task, existing)
    elif cfg.precision not in ("auto", precision.chosen):
        raise TrainError(f"--precision {cfg.precision} given, but the caller decided {precision.chosen}")
    cfg = replace(cfg, precision=precision.chosen)
    model_cfg = cfg.model_config(task)
    header = {
        "format": RUN_FORMAT,
        "train": cfg.identity(),
        "task": task.config.to_dict(),
        "model_config": model_cfg.to_dict(),
    }
    model = AssignAddTransformer(model_cfg, seed=cfg.seed).to(cfg.device)
    opt = adamw(model.trainable_parameters, cfg)
    start = 0
    if existing is not None:
        if {k: existing.get(k) for k in header} != header:
            differ = [k for k in ("model_config", "task") if existing.get(k) != header[k]]
            what = {"model_config": "another architecture", "task": "another task"}
            detail = f" ({' and '.join(what[k] for k in differ)})" if differ else ""
            raise TrainError(
                f"{run_dir}: holds a run with other settings{detail}; use another folder to start a new run"
            )
        resume = run_dir / "resume.pt"
        if resume.exists():
            try:
                state = torch.load(resume, map_location=cfg.device, weights_only=True)
                model.load_state_dict(state["state_dict"])
                opt.load_state_dict(state["optimizer"])
                start = int(state["step"])
            except Exception as e:  # a resume file we cannot use must not be silently ignored
                raise TrainError(f"{resume}: cannot resume from it ({str(e).splitlines()[0][:200]})") from None
    if threads is None:  # a new run, or one whose run.json predates the thread record
        threads = choose_threads(step_probe(cfg, task), precision.chosen, cores=usable_cores())
    if existing is None:
        record = {**header, "precision": precision.to_dict(), "threads": threads.to_dict()}
        atomic_write(run_json, json.dumps(record, indent=2) + "\n")
    return OpenRun(run_dir, cfg, task, model, opt, start, precision, threads)


def train(
    run_dir,
    cfg: TrainConfig,
    *,
    progress: bool = True,
    stop_after: int | None = None,
    early_stop=None,
    precision: PrecisionChoice | None = None,
    log: Callable[[str], None] | None = log_stderr,
) -> Path:
    """Train (or resume) the run in ``run_dir``; returns the final checkpoint's path.

    ``stop_after`` ends the call after that many steps in this call without finishing the run (a
    test's stand-in for a killed process). ``early_stop(step, accs) -> bool`` may end a run early.
    ``precision``: a caller's decision (see ``open_run``); ``log`` gets two lines saying which
    precision and how many torch threads the run uses and why (default: standard error; None: silent).
    The run trains on its threads; torch's thread count is restored when the call returns.
    """
    run = open_run(run_dir, cfg, precision)
    if log is not None:
        log(f"{run.run_dir}: {run.precision.log_line()}")
        log(f"{run.run_dir}: {run.threads.log_line()}")
    with torch_threads(run.threads.chosen):
        return _train_steps(run, progress=progress, stop_after=stop_after, early_stop=early_stop)


def _train_steps(run: OpenRun, *, progress: bool, stop_after: int | None, early_stop) -> Path:
    """``train``'s loop over the steps from ``run.start``, on the threads already set."""
    run_dir, cfg, task, model, opt, start = run.run_dir, run.cfg, run.task, run.model, run.opt, run.start
    files = RunFiles(run_dir, task.config.to_dict(), cfg.checkpoint_run())
    files.prepare(start)
    pools = {name: task.pool(name, cfg.eval_size, seed=1) for name in POOL_NAMES}  # SPEC §1.4's, seed 1
    use_bias = not model.biases_are_zero()
    t0 = time.time()
    if start == 0:
        accs = files.evaluate(model, pools, 0, None, t0)
        files.save(model, 0, accs)
    desc = f"train seed={cfg.seed} threads={run.threads.chosen}"
    bar = tqdm(total=cfg.steps, initial=start, desc=desc, unit="step", dynamic_ncols=True, disable=not progress)
    model.train()
    running, n_running = 0.0, 0
    step = start
    accs: dict = {}
    with bar:
        while step < cfg.steps:
            tokens, labels = task.training_batch(cfg.seed, step, cfg.batch_size)
            loss = training_step(model, opt, tokens, labels, device=cfg.device, bf16=cfg.use_bf16, biases=use_bias)
            step += 1
            running += loss.item()
            n_running += 1
            bar.update(1)
            evaluated = step % cfg.eval_every == 0 or step == cfg.steps
            if evaluated:
                accs = files.evaluate(model, pools, step, round(running / n_running, 6), t0)
                running, n_running = 0.0, 0
                key_accs = {p.split("_")[0] + ("h" if "heldout" in p else "r"): f"{accs[p]:.2f}" for p in KEY_POOLS}
                bar.set_postfix({"loss": f"{loss.item():.3f}", **key_accs})
            stop_now = evaluated and early_stop is not None and early_stop(step, accs)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps or stop_now:
                files.save(model, step, accs)
                files.save_resume(model, opt, step)
            if stop_now:
                break
            if stop_after is not None and step - start >= stop_after:
                return files.resume
    return files.save(model, step, accs, final=True)


# ----- the run folder's files ------------------------------------------------------------------------
@dataclass(frozen=True)
class RunFiles:
    """Where a run writes, and how: its evaluation log, its checkpoints, ``resume.pt``, ``final.pt``."""

    run_dir: Path
    task_meta: dict  # what every checkpoint records as its task
    run_meta: dict  # ... and as its run (``TrainConfig.checkpoint_run``)

    @property
    def log(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    @property
    def resume(self) -> Path:
        return self.run_dir / "resume.pt"

    def prepare(self, start: int) -> None:
        """Make ``checkpoints/`` and drop the log lines written after ``start``, the step the run resumes
        from (a run killed between the two writes); at 0 the run starts afresh, step 0's evaluation included."""
        (self.run_dir / "checkpoints").mkdir(exist_ok=True)
        if not self.log.exists():
            return
        keep = []
        for line in self.log.read_text().splitlines() if start > 0 else []:
            try:
                if json.loads(line)["step"] <= start:
                    keep.append(line)
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        atomic_write(self.log, "".join(l + "\n" for l in keep))

    def evaluate(self, model: AssignAddTransformer, pools: dict, step: int, loss, t0: float) -> dict:
        """Every pool's accuracy (6 decimals) at ``step``, appended to ``metrics.jsonl`` as one line
        ``{"step", "loss", "accuracy", "wall_s"}`` and returned; ``model`` is left in train mode."""
        model.eval()
        accs = {name: round(accuracy(model, *pools[name]), 6) for name in POOL_NAMES}
        model.train()
        record = {"step": step, "loss": loss, "accuracy": accs, "wall_s": round(time.time() - t0, 2)}
        with self.log.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        return accs

    def save(self, model: AssignAddTransformer, step: int, accs: dict, *, final: bool = False) -> Path:
        """``checkpoints/step_NNNNNN.pt``, without the all-zero frozen tensors (series files stay small);
        with ``final``, ``final.pt``: the weights after the run's last step, every tensor included."""
        path = self.run_dir / "final.pt" if final else self.run_dir / "checkpoints" / f"step_{step:06d}.pt"
        meta = {"task": self.task_meta, "step": step, "metrics": accs, "run": self.run_meta}
        save_checkpoint(model, path, **meta, drop_zero_frozen=not final)
        return path

    def save_resume(self, model: AssignAddTransformer, opt: torch.optim.Optimizer, step: int) -> None:
        atomic_save({"step": step, "state_dict": model.state_dict(), "optimizer": opt.state_dict()}, self.resume)
