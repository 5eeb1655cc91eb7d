"""The model of SPEC §2, its checkpoints and its training (SPEC §3)."""
from .checkpoint import CheckpointError, infer_config, load_checkpoint, load_checkpoint_full, save_checkpoint
from .transformer import AssignAddTransformer, ModelConfig

__all__ = [
    "AssignAddTransformer", "CheckpointError", "ModelConfig", "infer_config", "load_checkpoint",
    "load_checkpoint_full", "save_checkpoint",
]
