"""A training run's options (``TrainConfig``) and their checks, with nothing heavy imported: the command line
checks its flags with these before torch is imported (docs/errors.md)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path


class TrainError(ValueError):
    """A bad training option or an incompatible run folder."""


def read_run_json(run_json: Path) -> dict | None:
    """An existing run folder's run.json (a JSON object), or None where there is none."""
    if not run_json.exists():
        return None
    try:
        existing = json.loads(run_json.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TrainError(f"{run_json}: not valid JSON ({e})") from None
    if not isinstance(existing, dict):
        raise TrainError(f"{run_json}: expected a JSON object, found {type(existing).__name__}")
    return existing


@dataclass
class TrainConfig:
    seed: int = 42  # the run's seed: initialisation and batch order
    f: float = 0.7
    r: float = 1.0
    split_seed: int = 42  # SPEC §1.3's split seed, fixed by the paper
    steps: int = 40_000
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 0.02
    betas: tuple[float, float] = (0.9, 0.999)
    device: str = "cpu"
    precision: str = "auto"  # auto: measured on this machine (training/precision.py); fp32, bf16: as given
    checkpoint_every: int = 100
    eval_every: int = 100
    eval_size: int = 500
    threads: int | None = None  # None: measured on this machine (training/threads.py); N: as given
    # The architecture (SPEC §2.1; defaults: the paper's) and the task's shape (SPEC §1.1). Recorded in
    # run.json's ``model_config`` and ``task``, which a resume must match.
    n_layers: int = 2
    n_heads: int = 1
    d_model: int = 128
    d_head: int | None = None  # None: d_model // n_heads
    d_mlp: int | None = None  # None: 4 * d_model
    mlp_layers: tuple[int, ...] | None = None  # None: the last layer only (the paper: Layer 2)
    layernorm: bool = False
    modulus: int = 59
    n_vars: int = 12

    def __post_init__(self):
        if self.mlp_layers is not None:  # a list read back from JSON, or given by a caller
            self.mlp_layers = tuple(self.mlp_layers)

    def validate(self) -> None:
        self._validate_architecture()
        decay, precision = self.weight_decay, self.precision
        checks = [
            (self.steps >= 1, f"--steps must be at least 1, got {self.steps}"),
            (self.batch_size >= 1, f"--batch-size must be at least 1, got {self.batch_size}"),
            (math.isfinite(self.lr) and self.lr > 0, f"--lr must be a positive number, got {self.lr}"),
            (math.isfinite(decay) and decay >= 0, f"--weight-decay must be >= 0, got {decay}"),
            (0 < self.f <= 1, f"--f must be in (0, 1], got {self.f}"),
            (0 <= self.r <= 1, f"--r must be in [0, 1], got {self.r}"),
            (precision in ("auto", "fp32", "bf16"), f"--precision must be auto, fp32 or bf16, got {precision}"),
            (self.checkpoint_every >= 1, f"--checkpoint-every must be at least 1, got {self.checkpoint_every}"),
            (self.eval_every >= 1, f"--eval-every must be at least 1, got {self.eval_every}"),
            (self.eval_size >= 1, f"--eval-size must be at least 1, got {self.eval_size}"),
            (self.threads is None or self.threads >= 1, f"--threads must be at least 1, got {self.threads}"),
        ]
        for ok, msg in checks:
            if not ok:
                raise TrainError(msg)
        if self.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise TrainError(f"--device {self.device}: CUDA is not available on this machine")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise TrainError(f"--device must be cpu or cuda[:N], got {self.device!r}")

    def _validate_architecture(self) -> None:
        """The architecture and task options, each refused with one line naming its flag."""

        def positive(flag, value):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TrainError(f"{flag} must be a positive integer, got {value}")

        positive("--n-layers", self.n_layers)
        positive("--n-heads", self.n_heads)
        positive("--d-model", self.d_model)
        if self.d_head is None and self.d_model < self.n_heads:
            raise TrainError(
                f"--d-model {self.d_model} split over --n-heads {self.n_heads} leaves no width per head; give --d-head"
            )
        positive("--d-head", self.resolved_d_head)
        positive("--d-mlp", self.resolved_d_mlp)
        layers = self.resolved_mlp_layers
        bad = [m for m in layers if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < self.n_layers]
        if bad:
            raise TrainError(f"--mlp-layers: {bad[0]} is not a layer index 0..{self.n_layers - 1}")
        if len(set(layers)) != len(layers):
            raise TrainError(f"--mlp-layers lists a layer twice: {','.join(map(str, layers))}")
        if isinstance(self.modulus, bool) or not isinstance(self.modulus, int) or self.modulus < 2:
            raise TrainError(f"--modulus must be an integer of at least 2, got {self.modulus}")
        if isinstance(self.n_vars, bool) or not isinstance(self.n_vars, int) or not 3 <= self.n_vars <= 26:
            # 2 is a vocabulary (SPEC §1.1) but no training set: a and b are never the RHS operand and
            # the last two variables never the LHS one, so no variable pair would be left to train on.
            raise TrainError(
                f"--n-vars must be in 3..26 (the letters a..z; 2 leaves no variable pair to train on), "
                f"got {self.n_vars}"
            )

    @property
    def resolved_d_head(self) -> int:
        return self.d_model // self.n_heads if self.d_head is None else self.d_head

    @property
    def resolved_d_mlp(self) -> int:
        return 4 * self.d_model if self.d_mlp is None else self.d_mlp

    @property
    def resolved_mlp_layers(self) -> tuple[int, ...]:
        return (self.n_layers - 1,) if self.mlp_layers is None else tuple(self.mlp_layers)

    def task(self):
        """The run's task: the split of (f, r, split seed) over ``modulus`` numbers and ``n_vars`` variables.
        a and b are never the RHS operand in training, the last two variables never the LHS one (for
        the paper's 12: k and l, SPEC §1.3)."""
        from ..data import Task, Vocab

        names = Vocab(self.modulus, self.n_vars).var_names
        return Task(self.f, self.r, self.split_seed, modulus=self.modulus, n_vars=self.n_vars, never_lhs=names[-2:])

    def model_config(self, task):
        """The model the run trains (a ``ModelConfig``), sized for ``task``'s vocabulary."""
        from ..model.transformer import ModelConfig

        return ModelConfig(
            d_vocab=task.vocab.size,
            d_vocab_out=task.vocab.modulus,
            d_model=self.d_model,
            d_head=self.resolved_d_head,
            n_heads=self.n_heads,
            d_mlp=self.resolved_d_mlp,
            n_layers=self.n_layers,
            mlp_layers=self.resolved_mlp_layers,
            layernorm=self.layernorm,
        )

    @property
    def use_bf16(self) -> bool:
        if self.precision == "auto":  # no silent guess: the answer depends on the machine
            raise TrainError(
                "TrainConfig.use_bf16: precision 'auto' is decided when the run opens "
                "(open_run / resolve_precision); this config was not resolved"
            )
        return self.precision == "bf16"

    def identity(self) -> dict:
        """The fields that make two runs the same run (a resume must match them); the architecture and
        the task's shape are compared through run.json's ``model_config`` and ``task``."""
        d = asdict(self)
        may_differ = ("steps", "device", "threads", "eval_every", "eval_size", "checkpoint_every", "precision")
        architecture = ("n_layers", "n_heads", "d_model", "d_head", "d_mlp", "mlp_layers", "layernorm")
        for k in (*may_differ, *architecture, "modulus", "n_vars"):
            d.pop(k)
        d["betas"] = list(self.betas)
        d["bf16"] = self.use_bf16
        return d

    def checkpoint_run(self) -> dict:
        """What each checkpoint of the run records of it (``run``): its seed and its arithmetic."""
        return {"seed": self.seed, "bf16": self.use_bf16}
