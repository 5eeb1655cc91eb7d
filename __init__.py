"""assignadd: executable, falsifiable tests of the mechanistic claims of "Assign and Add".

Names are imported lazily (PEP 562), so ``import assignadd`` (e.g. by the pytest plugin) costs
nothing until a model or task is used.
"""

from __future__ import annotations

import importlib
from pathlib import Path

__version__ = "0.1.0"
_HERE = Path(__file__).resolve().parent

_LAZY = {
    "Task": "data",
    "parse": "data",
    "render": "data",
    "to_tokens": "data",
    "AssignAddTransformer": "model",
    "CheckpointError": "model",
    "ModelConfig": "model",
    "load_checkpoint": "model",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'assignadd' has no attribute {name!r}")


def reference_checkpoint() -> Path:
    """Path of the bundled reference checkpoint: the final checkpoint of a full run (SPEC §3)."""
    return _HERE / "checkpoints" / "reference.pt"


def reference_series() -> list[Path]:
    """The bundled thinned checkpoint series of the reference run, ordered by step."""
    return sorted((_HERE / "checkpoints" / "series").glob("step_*.pt"))


__all__ = [*_LAZY, "reference_checkpoint", "reference_series"]
