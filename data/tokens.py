"""The task's vocabulary (SPEC §1.1) and its text form.

Token ids: 0..N-1 are the numbers (N = 59), then `+`, `=`, `PAD`, then the variables `a`, `b`, ...
The text form separates tokens by single spaces: ``PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 =``.
"""
from __future__ import annotations

import string
from dataclasses import dataclass

import torch

SEQ_LEN = 16
CORE_START = 12  # the core `+ LHS RHS =` sits at positions 12..15
PREFIX_LEN = CORE_START
POS_PLUS, POS_LHS, POS_RHS, POS_EQ = 12, 13, 14, 15


class ParseError(ValueError):
    """A text sequence that is not in the task's text form."""


@dataclass(frozen=True)
class Vocab:
    """Token ids for a task with ``modulus`` numbers and ``n_vars`` variables."""

    modulus: int = 59
    n_vars: int = 12

    def __post_init__(self):
        if not 2 <= self.n_vars <= 26:
            raise ValueError(f"n_vars must be in 2..26, got {self.n_vars}")
        if self.modulus < 2:
            raise ValueError(f"modulus must be at least 2, got {self.modulus}")

    @property
    def plus(self) -> int:
        return self.modulus

    @property
    def eq(self) -> int:
        return self.modulus + 1

    @property
    def pad(self) -> int:
        return self.modulus + 2

    @property
    def first_var(self) -> int:
        return self.modulus + 3

    @property
    def size(self) -> int:
        return self.modulus + 3 + self.n_vars

    @property
    def var_names(self) -> tuple[str, ...]:
        return tuple(string.ascii_lowercase[: self.n_vars])

    def var_token(self, name_or_index: str | int) -> int:
        if isinstance(name_or_index, str):
            return self.first_var + self.var_names.index(name_or_index)
        return self.first_var + int(name_or_index)

    def is_var(self, token):
        return (token >= self.first_var) & (token < self.size)

    def is_number(self, token):
        return (token >= 0) & (token < self.modulus)

    def token_name(self, token: int) -> str:
        token = int(token)
        if 0 <= token < self.modulus:
            return str(token)
        if token == self.plus:
            return "+"
        if token == self.eq:
            return "="
        if token == self.pad:
            return "PAD"
        if self.first_var <= token < self.size:
            return self.var_names[token - self.first_var]
        raise ParseError(f"token id {token} is outside the vocabulary 0..{self.size - 1}")

    def token_id(self, word: str) -> int:
        if word == "+":
            return self.plus
        if word == "=":
            return self.eq
        if word == "PAD":
            return self.pad
        if word in self.var_names:
            return self.var_token(word)
        if word.isdigit() and (word == "0" or not word.startswith("0")) and int(word) < self.modulus:
            return int(word)
        raise ParseError(
            f"unknown token {word!r}: expected a number 0..{self.modulus - 1}, "
            f"a variable {self.var_names[0]}..{self.var_names[-1]}, '+', '=' or 'PAD'"
        )


VOCAB = Vocab()


def parse(text: str, vocab: Vocab = VOCAB) -> torch.Tensor:
    """Parse the text form into a LongTensor of 16 token ids.

    Checks the token words and the frame (prefix of assignments/PADs, then ``+ LHS RHS =``);
    it does not check that variables in the core are assigned (the model may be asked anything).
    """
    if not isinstance(text, str):
        raise ParseError(f"expected a string, got {type(text).__name__}")
    words = text.split()
    if len(words) != SEQ_LEN:
        raise ParseError(f"expected {SEQ_LEN} tokens separated by spaces, got {len(words)}: {text!r}")
    ids = [vocab.token_id(w) for w in words]
    if ids[POS_PLUS] != vocab.plus or ids[POS_EQ] != vocab.eq:
        raise ParseError(f"expected the core '+ LHS RHS =' at positions 12-15, got {' '.join(words[12:])!r}")
    for pos in (POS_LHS, POS_RHS):
        tok = ids[pos]
        if not (0 <= tok < vocab.modulus or vocab.first_var <= tok < vocab.size):
            raise ParseError(f"operand at position {pos} must be a number or a variable, got {words[pos]!r}")
    i = 0
    while i < PREFIX_LEN:
        tok = ids[i]
        if tok == vocab.pad:
            i += 1
        elif vocab.first_var <= tok < vocab.size and i + 1 < PREFIX_LEN and 0 <= ids[i + 1] < vocab.modulus:
            i += 2
        else:
            raise ParseError(
                f"prefix token {words[i]!r} at position {i} is not PAD or the start of an assignment 'var value'"
            )
    return torch.tensor(ids, dtype=torch.long)


def render(tokens, vocab: Vocab = VOCAB) -> str:
    """The text form of one sequence (a 1-D tensor or list of token ids)."""
    if isinstance(tokens, torch.Tensor):
        if tokens.dim() != 1:
            raise ParseError(f"render takes one sequence (1-D), got shape {tuple(tokens.shape)}")
        tokens = tokens.tolist()
    return " ".join(vocab.token_name(t) for t in tokens)
