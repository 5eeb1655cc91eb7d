"""The task of SPEC §1: tokens, sequences, the split and the evaluation pools."""

from .sequences import (
    KIND_0VAR,
    KIND_1VAR_LHS,
    KIND_1VAR_RHS,
    KIND_2VAR,
    build_sequences,
    operand_sources,
    value_positions,
)
from .task import HELDOUT_POOLS, POOL_NAMES, RESTRICTED_POOLS, Task, TaskConfig, TaskError
from .tokens import POS_EQ, POS_LHS, POS_PLUS, POS_RHS, SEQ_LEN, VOCAB, ParseError, Vocab, parse, render, to_tokens

__all__ = [
    "HELDOUT_POOLS",
    "POS_EQ",
    "POS_LHS",
    "POS_PLUS",
    "POS_RHS",
    "KIND_0VAR",
    "KIND_1VAR_LHS",
    "KIND_1VAR_RHS",
    "KIND_2VAR",
    "POOL_NAMES",
    "RESTRICTED_POOLS",
    "SEQ_LEN",
    "VOCAB",
    "ParseError",
    "Task",
    "TaskConfig",
    "TaskError",
    "Vocab",
    "build_sequences",
    "operand_sources",
    "parse",
    "render",
    "to_tokens",
    "value_positions",
]
