"""assignadd: executable, falsifiable tests of the mechanistic claims of "Assign and Add"."""
from __future__ import annotations

from pathlib import Path

from .data import Task, parse, render
from .model import AssignAddTransformer, CheckpointError, ModelConfig, load_checkpoint

__version__ = "0.1.0"
_HERE = Path(__file__).resolve().parent


def reference_checkpoint() -> Path:
    """Path of the bundled reference checkpoint: the final checkpoint of the seed-42 run (SPEC §3)."""
    return _HERE / "checkpoints" / "reference.pt"


def reference_series() -> list[Path]:
    """The bundled thinned checkpoint series of the reference run, ordered by step."""
    return sorted((_HERE / "checkpoints" / "series").glob("step_*.pt"))


__all__ = [
    "AssignAddTransformer", "CheckpointError", "ModelConfig", "Task", "load_checkpoint", "parse",
    "reference_checkpoint", "reference_series", "render",
]
