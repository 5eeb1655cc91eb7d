"""The model of SPEC §2, its checkpoints and its hook names. Training (SPEC §3) is ``assignadd.training``.

Names are imported on first use (PEP 562): ``import assignadd.model`` (or ``assignadd.model.hooks``) costs
nothing until a model is built or loaded.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "AssignAddTransformer": "transformer",
    "ModelConfig": "transformer",
    "CheckpointError": "checkpoint",
    "infer_config": "checkpoint",
    "load_checkpoint": "checkpoint",
    "load_checkpoint_full": "checkpoint",
    "read_checkpoint_file": "checkpoint",
    "save_checkpoint": "checkpoint",
    "state_sha256": "checkpoint",
    "step_from_name": "checkpoint",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_LAZY)
