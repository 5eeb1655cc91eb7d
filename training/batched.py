"""K models trained in one batched step, with the same math as K separate ``train`` runs.

What it is for: a sweep trains hundreds of small models. On a GPU one model of this size leaves the
device mostly idle (a step is a few dozen small kernels), so K models stacked along a leading axis
train in about the time of one. On a CPU there is nothing to gain (the work is the same), but the
result is the same too, which is what the tests check there.

How: the trainable weights of the K models are stacked, ``W[k] = weights of model k``
(``(K, *shape)``), and the paper's forward (``AssignAddTransformer.last_logits``, the trainer's fast
path, unchanged) is mapped over that axis with ``torch.func.vmap`` + ``functional_call``. Model k
sees its own batch, ``Task(f_k, r_k).training_batch(seed_k, step)``, exactly the batch ``train`` would
draw. The loss is ``sum_k CE_k`` (each ``CE_k`` the mean over model k's batch), so
``d loss / d W[k] = d CE_k / d W_k``: the gradients do not mix. AdamW is elementwise (its moments,
weight decay and update touch each entry alone, with one step count), so one AdamW over the stacked
tensors is K AdamWs. Same initialisation (``AssignAddTransformer(seed=seed_k)``), same batches, same
optimizer: the same weights, to float tolerance (batched matmuls may sum in another order).

Every member writes an ordinary run folder (``run.json``, ``checkpoints/``, ``metrics.jsonl``,
``resume.pt``, ``final.pt``) in ``train``'s format, so a batched run can be resumed by ``train`` and the
other way round. A member that stops early (``early_stops[k]``) leaves the stack; the others go on.

Precision: one for the stack. ``auto`` times this module's own step on K stacked models
(``step_probe``, ``training.precision``), unless the members' run folders already record one.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap

from ..data import Task
from ..model.transformer import AssignAddTransformer, ModelConfig
from .fast_forward import last_logits
from .precision import SCOUT_BATCH, PrecisionChoice, StepProbe, choose_precision
from .train import (
    RunFiles,
    TrainConfig,
    TrainError,
    _autocast,
    adamw,
    eval_pools,
    log_stderr,
    open_run,
    prepare_run_folder,
    recorded_precision,
)

# Settings every member must share: they are one optimizer and one loop.
SHARED = (
    "steps",
    "batch_size",
    "lr",
    "weight_decay",
    "betas",
    "device",
    "precision",
    "eval_every",
    "eval_size",
    "checkpoint_every",
)


class _LastLogits(nn.Module):
    """``functional_call`` calls ``forward``; the trainer's path is ``fast_forward.last_logits`` without biases."""

    def __init__(self, model: AssignAddTransformer):
        super().__init__()
        self.model = model

    def forward(self, tokens):  # (B, T) -> (B, d_vocab_out)
        return last_logits(self.model, tokens, biases=False)


@dataclass
class _Member:
    """One run of the stack: its folder, task, a model/optimizer pair in ``train``'s layout, its log."""

    run_dir: Path | None  # None: a member of a precision probe, which writes nothing
    cfg: TrainConfig  # precision decided
    task: Task
    model: AssignAddTransformer
    opt: torch.optim.AdamW
    pools: dict
    early_stop: object = None
    accs: dict = field(default_factory=dict)
    running: float = 0.0
    n_running: int = 0

    @property
    def files(self) -> RunFiles:
        return RunFiles(self.run_dir, self.task.config.to_dict(), self.cfg.checkpoint_run())

    def evaluate(self, step: int, loss, t0: float) -> dict:
        self.accs = self.files.evaluate(self.model, self.pools, step, loss, t0)
        return self.accs

    def save(self, step: int) -> None:
        """The step's checkpoint and ``resume.pt`` (at every save, step 0 included)."""
        self.files.save_step(self.model, step, self.accs)
        self.files.save_resume(self.model, self.opt, step)

    def finish(self, step: int) -> Path:
        return self.files.save_final(self.model, step, self.accs)


def _shared(cfg: TrainConfig) -> dict:
    return {k: getattr(cfg, k) for k in SHARED}


def _open_member(
    run_dir, cfg: TrainConfig, early_stop, precision: PrecisionChoice | None = None
) -> tuple[_Member, int]:
    """Create or resume one run folder exactly as ``train`` does; returns the member and its start step."""
    run = open_run(run_dir, cfg, precision)
    run_dir, cfg, task, model, opt, start = run.run_dir, run.cfg, run.task, run.model, run.opt, run.start
    if not model.biases_are_zero():
        raise TrainError(f"{run_dir}: biases are not zero; the batched step skips them (SPEC §2.1 freezes them at 0)")
    prepare_run_folder(run_dir, start)
    return _Member(run_dir, cfg, task, model, opt, eval_pools(task, cfg), early_stop), start


class _Stack:
    """The members' trainable weights stacked to ``(K, *shape)`` leaves, and one AdamW over them."""

    def __init__(self, members: list[_Member]):
        self.members = members
        first = members[0]
        self.names = [n for n, p in first.model.named_parameters() if p.requires_grad]
        # The wrapper's own weights are never used: every parameter and buffer is passed in per call.
        self.wrapper = _LastLogits(first.model)
        self.fixed = {"model." + n: p.detach() for n, p in first.model.named_parameters() if not p.requires_grad}
        self.fixed.update({"model." + n: b for n, b in first.model.named_buffers()})
        with torch.no_grad():
            self.leaves = [
                torch.stack([dict(m.model.named_parameters())[n].detach() for m in members])
                .clone()
                .requires_grad_(True)
                for n in self.names
            ]
        self.cfg = first.cfg
        self.opt = adamw(self.leaves, self.cfg)
        member_states = [m.opt.state_dict()["state"] for m in members]
        if any(member_states):
            if not all(len(s) == len(self.names) for s in member_states):
                raise TrainError("batched members must all be fresh or all resumed")
            state = {}
            for i in range(len(self.names)):
                steps = {float(s[i]["step"]) for s in member_states}
                if len(steps) != 1:
                    raise TrainError(f"batched members have optimizer step counts {sorted(steps)}; they must match")
                state[i] = {
                    "step": member_states[0][i]["step"].clone(),
                    "exp_avg": torch.stack([s[i]["exp_avg"] for s in member_states]),
                    "exp_avg_sq": torch.stack([s[i]["exp_avg_sq"] for s in member_states]),
                }
            self.opt.load_state_dict({"state": state, "param_groups": self.opt.state_dict()["param_groups"]})

        def logits(params: dict, tokens):  # (B, T) -> (B, d_vocab_out), one model
            return functional_call(self.wrapper, (params, self.fixed), (tokens,))

        self._logits = vmap(logits)  # ({n: (K, ...)}, (K, B, T)) -> (K, B, d_vocab_out)
        self._loss = vmap(F.cross_entropy)  # ((K, B, C), (K, B)) -> (K,)

    def step(self, tokens: torch.Tensor, labels: torch.Tensor, cfg: TrainConfig | None = None) -> list[float]:
        """One AdamW step of every member on its batch (``tokens (K, B, T)``, ``labels (K, B)``), on
        ``cfg``'s device and precision (default, or when ``cfg`` says ``auto``: the members')."""
        cfg = cfg if cfg is not None and cfg.precision != "auto" else self.cfg
        params = {"model." + n: leaf for n, leaf in zip(self.names, self.leaves)}
        with _autocast(cfg.device, cfg.use_bf16):
            logits = self._logits(params, tokens)
        losses = self._loss(logits.float(), labels)  # (K,)
        self.opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        self.opt.step()
        return losses.detach().tolist()

    @torch.no_grad()
    def export(self) -> None:
        """Copy each member's slice of the weights and optimizer state back into its own model and
        AdamW, in ``train``'s layout (for evaluation, checkpoints and ``resume.pt``)."""
        opt_state = self.opt.state_dict()["state"]
        for k, m in enumerate(self.members):
            params = dict(m.model.named_parameters())
            for n, leaf in zip(self.names, self.leaves):
                params[n].copy_(leaf[k])
            if opt_state:
                state = {
                    i: {
                        "step": s["step"].clone(),
                        "exp_avg": s["exp_avg"][k].clone(),
                        "exp_avg_sq": s["exp_avg_sq"][k].clone(),
                    }
                    for i, s in opt_state.items()
                }
                m.opt.load_state_dict({"state": state, "param_groups": m.opt.state_dict()["param_groups"]})


def step_probe(cfgs: list[TrainConfig]) -> StepProbe:
    """``_Stack.step`` as ``training.precision`` times it: the members' fresh models (their seeds, their
    tasks' batches), one model at a scout batch, then all K at the run's batch (a GPU's gain from bf16
    shows at the full stack, not on one small model)."""
    by_split = {(c.f, c.r, c.split_seed): None for c in cfgs}
    by_split = {key: Task(*key) for key in by_split}  # one Task per split, not per member
    tasks = [by_split[(c.f, c.r, c.split_seed)] for c in cfgs]
    batch = cfgs[0].batch_size
    sizes = {"scout": (1, min(SCOUT_BATCH, batch)), "workload": (len(cfgs), batch)}

    def make(precision: str, size: str):
        k, b = sizes[size]
        members = []
        for c, task in zip(cfgs[:k], tasks):
            c = replace(c, precision=precision)
            model = AssignAddTransformer(
                ModelConfig(d_vocab=task.vocab.size, d_vocab_out=task.vocab.modulus), seed=c.seed
            ).to(c.device)
            members.append(_Member(None, c, task, model, adamw(model.trainable_parameters, c), {}))
        stack = _Stack(members)
        steps = itertools.count()

        def step():
            i = next(steps)
            batches = [m.task.training_batch(m.cfg.seed, i, b) for m in members]
            tokens = torch.stack([x[0] for x in batches]).to(stack.cfg.device)  # (k, b, T)
            labels = torch.stack([x[1] for x in batches]).to(stack.cfg.device)  # (k, b)
            losses = stack.step(tokens, labels)
            return sum(losses), [leaf.grad for leaf in stack.leaves if leaf.grad is not None]

        return step

    def shape(size):
        k, b = sizes[size]
        return {"step": "batched", "models": k, "batch_size": b}

    return StepProbe(make, scout=shape("scout"), workload=shape("workload"))


def resolve_precision(run_dirs, cfgs: list[TrainConfig]) -> PrecisionChoice:
    """One precision for the stack: as given; for ``auto``, the one the members' run folders record
    (they must agree), else measured on ``step_probe(cfgs)``."""
    cfg = cfgs[0]
    if cfg.precision != "auto":
        return PrecisionChoice.given(cfg.precision)
    recorded = {}
    for d in run_dirs:
        try:
            header = json.loads((Path(d) / "run.json").read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue  # no run yet, or a file open_run will refuse with its reason
        if isinstance(header, dict) and recorded_precision(header) is not None:
            recorded[Path(d)] = recorded_precision(header)
    if len(set(recorded.values())) > 1:
        found = ", ".join(f"{d}: {p}" for d, p in recorded.items())
        raise TrainError(f"batched members were started with different precisions ({found}); they must match")
    if recorded:
        (chosen,) = set(recorded.values())
        return PrecisionChoice(
            requested="auto",
            chosen=chosen,
            source="run folder",
            reason=f"auto, resumed: the members' run.json record {chosen}",
        )
    return choose_precision(cfg.device, step_probe(cfgs))


def train_batched(
    run_dirs,
    cfgs: list[TrainConfig],
    *,
    early_stops=None,
    progress: bool = False,
    stop_after: int | None = None,
    precision: PrecisionChoice | None = None,
    log: Callable[[str], None] | None = log_stderr,
) -> list[Path]:
    """Train (or resume) K runs in one batched step; returns each run's final checkpoint path.

    ``cfgs[k]`` may differ in seed, f, r and split seed; everything else (``SHARED``) must match, and
    all runs must resume from the same step. ``early_stops[k](step, accs) -> bool`` ends run k early
    (written as ``train`` writes an early stop); ``stop_after`` ends the call after that many steps
    without finishing (a test's stand-in for a killed process), returning the ``resume.pt`` paths.
    ``precision``: a caller's decision (default: ``resolve_precision``); ``log`` gets one line saying
    which precision and why (default: standard error; None: silent).
    """
    run_dirs = [Path(d) for d in run_dirs]
    if not run_dirs or len(run_dirs) != len(cfgs):
        raise TrainError(
            f"train_batched needs one config per run folder, got {len(run_dirs)} folders and {len(cfgs)} configs"
        )
    if len(set(d.resolve() for d in run_dirs)) != len(run_dirs):
        raise TrainError("train_batched: two members share a run folder")
    early_stops = list(early_stops) if early_stops is not None else [None] * len(cfgs)
    first = _shared(cfgs[0])
    for d, c in zip(run_dirs, cfgs):
        other = _shared(c)
        diff = [k for k in SHARED if other[k] != first[k]]
        if diff:
            raise TrainError(
                f"{d}: batched members must share {', '.join(diff)} (got {other[diff[0]]!r}, "
                f"expected {first[diff[0]]!r})"
            )
    if cfgs[0].threads:
        torch.set_num_threads(cfgs[0].threads)  # before a measured precision is timed
    for c in cfgs:
        c.validate()  # a bad option is an error before a second of timing
    if precision is None:
        precision = resolve_precision(run_dirs, cfgs)
    cfgs = [replace(c, precision=precision.chosen) for c in cfgs]
    cfg = cfgs[0]
    if log is not None:
        log(f"batched K={len(cfgs)} ({run_dirs[0].parent}): {precision.log_line()}")
    opened = [_open_member(d, c, e, precision) for d, c, e in zip(run_dirs, cfgs, early_stops)]
    starts = {s for _, s in opened}
    if len(starts) != 1:
        raise TrainError(f"batched members resume from different steps {sorted(starts)}; group them by step")
    members = [m for m, _ in opened]
    start = starts.pop()
    finals: dict[Path, Path] = {}
    t0 = time.time()
    if start == 0:
        for m in members:
            m.evaluate(0, None, t0)
            m.save(0)
    for m in members:
        m.model.train()
    active = members
    stack = _Stack(active)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=cfg.steps, initial=start, desc=f"train batched K={len(members)}", unit="step", dynamic_ncols=True
        )
    step, done_in_call = start, 0
    try:
        while step < cfg.steps and active:
            batches = [m.task.training_batch(m.cfg.seed, step, cfg.batch_size) for m in active]
            tokens = torch.stack([b[0] for b in batches]).to(cfg.device)  # (K, B, T)
            labels = torch.stack([b[1] for b in batches]).to(cfg.device)  # (K, B)
            losses = stack.step(tokens, labels)
            step += 1
            done_in_call += 1
            for m, loss in zip(active, losses):
                m.running += loss
                m.n_running += 1
            if bar is not None:
                bar.update(1)
            evaluating = step % cfg.eval_every == 0 or step == cfg.steps
            checkpointing = step % cfg.checkpoint_every == 0 or step == cfg.steps
            stopping = []
            if evaluating or checkpointing:
                stack.export()
            if evaluating:
                for m in active:
                    accs = m.evaluate(step, round(m.running / m.n_running, 6), t0)
                    m.running, m.n_running = 0.0, 0
                    if m.early_stop is not None and m.early_stop(step, accs):
                        stopping.append(m)
            for m in active:
                if checkpointing or m in stopping:
                    m.save(step)
            for m in stopping:
                finals[m.run_dir] = m.finish(step)
            if stopping:
                active = [m for m in active if m not in stopping]
                if active:
                    stack = _Stack(active)  # the stopped members leave; the others keep their state
            if stop_after is not None and done_in_call >= stop_after and step < cfg.steps and active:
                return [m.run_dir / "resume.pt" for m in members]
    finally:
        if bar is not None:
            bar.close()
    if active:
        stack.export()
        for m in active:
            finals[m.run_dir] = m.finish(step)
    return [finals[m.run_dir] for m in members]
