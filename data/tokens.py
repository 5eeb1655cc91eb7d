"""The task's vocabulary (SPEC §1.1) and its text form.

Token ids: 0..N-1 are the numbers (N = 59), then `+`, `=`, `PAD`, then the variables `a`, `b`, ...
The text form separates tokens by single spaces: ``PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 =``;
``parse`` also reads the short form a person types (``a=3 b=4 + b 5 =``), and ``to_tokens`` a list of texts.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import torch

SEQ_LEN = 16
PREFIX_LEN = 12  # the assignment prefix; the core `+ LHS RHS =` sits at positions 12..15
POS_PLUS, POS_LHS, POS_RHS, POS_EQ = 12, 13, 14, 15


class ParseError(ValueError):
    """A text sequence that is not in the task's text form."""


# The tokens between the numbers and the variables: `+`, `=`, PAD (SPEC §1.1).
N_SPECIAL = 3


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
        return self.modulus + N_SPECIAL

    @property
    def size(self) -> int:
        return self.modulus + N_SPECIAL + self.n_vars

    @property
    def var_names(self) -> tuple[str, ...]:
        return tuple(string.ascii_lowercase[: self.n_vars])

    def var_token(self, name_or_index: str | int) -> int:
        index = self.var_names.index(name_or_index) if isinstance(name_or_index, str) else int(name_or_index)
        return self.first_var + index

    def is_var(self, token):
        return (token >= self.first_var) & (token < self.size)

    @property
    def specials(self) -> dict[str, int]:
        """The words of the tokens between the numbers and the variables, with their ids."""
        return {"+": self.plus, "=": self.eq, "PAD": self.pad}

    def token_name(self, token: int) -> str:
        token = int(token)
        if 0 <= token < self.modulus:
            return str(token)
        if self.modulus <= token < self.first_var:
            return next(word for word, t in self.specials.items() if t == token)
        if self.first_var <= token < self.size:
            return self.var_names[token - self.first_var]
        raise ParseError(f"token id {token} is outside the vocabulary 0..{self.size - 1}")

    def token_id(self, word: str) -> int:
        if word in self.specials:
            return self.specials[word]
        if word in self.var_names:
            return self.var_token(word)
        if word.isdigit() and (word == "0" or not word.startswith("0")) and int(word) < self.modulus:
            return int(word)
        raise ParseError(
            f"unknown token {word!r}: expected a number 0..{self.modulus - 1}, "
            f"a variable {self.var_names[0]}..{self.var_names[-1]}, '+', '=' or 'PAD'"
        )


VOCAB = Vocab()


def _words(text: str, vocab: Vocab) -> list[str]:
    """The words of a text, with the short assignment form ``a=3`` split into ``a 3`` (and ``27=`` into ``27 =``)."""
    words = []
    for word in text.replace(",", " ").split():
        if word == "=" or "=" not in word:
            words.append(word)
            continue
        left, _, right = word.partition("=")
        if not left or "=" in right:
            raise ParseError(f"cannot read {word!r}: write an assignment as 'var=value' or 'var value' (e.g. 'a=3')")
        if not right:  # "27=": the closing '=' typed without a space
            words += [left, "="]
            continue
        if left not in vocab.var_names:
            raise ParseError(
                f"{word!r}: an assignment starts with a variable "
                f"{vocab.var_names[0]}..{vocab.var_names[-1]}, got {left!r}"
            )
        if right in vocab.var_names:
            raise ParseError(
                f"{word!r}: a variable is assigned a number 0..{vocab.modulus - 1}, not another "
                f"variable (the task has no variable-to-variable assignment; write e.g. '{left}=3')"
            )
        words += [left, right]
    return words


def parse(text: str, vocab: Vocab = VOCAB) -> torch.Tensor:
    """Parse one sequence's text into a LongTensor of 16 token ids.

    Takes the full form (16 words, PADs included: ``PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 =``)
    and the short form a person types: assignments as ``a=3`` or ``a 3``, then the core
    ``+ LHS RHS =``, with fewer than 16 words; the PADs that make up 16 go in front of the assignments
    (one of the arrangements training draws: every PAD in the first gap). ``a=3 b=4 + b 5 =`` is
    ``PAD PAD PAD PAD PAD PAD PAD PAD a 3 b 4 + b 5 =``.

    Checks the words and the frame (a prefix of assignments and PADs, then ``+ LHS RHS =``); it does
    not check that variables in the core are assigned (the model may be asked anything). For a batch,
    see ``to_tokens``.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected a string, got {type(text).__name__} (for a list of strings use to_tokens)")
    words = _words(text, vocab)
    if not words:
        raise ParseError("expected a sequence ending in the core '+ LHS RHS =', got no tokens")
    if len(words) > SEQ_LEN:
        raise ParseError(f"expected {SEQ_LEN} tokens separated by spaces, got {len(words)}: {text!r}")
    padded = SEQ_LEN - len(words)
    note = f" (the text was padded to {SEQ_LEN} tokens with {padded} PADs in front)" if padded else ""
    if padded and (len(words) < 4 or words[-4] != "+" or words[-1] != "="):
        raise ParseError(f"expected the core '+ LHS RHS =' at the end, got {' '.join(words[-4:])!r}")
    words = ["PAD"] * padded + words
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
                f"prefix token {words[i]!r} at position {i} is not PAD or the start of an assignment 'var value'{note}"
            )
    return torch.tensor(ids, dtype=torch.long)


def to_tokens(texts, vocab: Vocab = VOCAB) -> torch.Tensor:
    """A batch of token ids [B, 16] from one text, a list of texts (each as ``parse`` reads it), or
    token ids already ([16] or [B, 16], checked against the vocabulary)."""
    if isinstance(texts, str):
        return parse(texts, vocab)[None]
    if isinstance(texts, torch.Tensor) or (hasattr(texts, "shape") and hasattr(texts, "dtype")):
        tokens = torch.as_tensor(texts)
        if tokens.dim() == 1:
            tokens = tokens[None]
        if tokens.dim() != 2 or tokens.shape[1] != SEQ_LEN:
            raise ParseError(f"expected token ids of shape [B, {SEQ_LEN}] or [{SEQ_LEN}], got {tuple(tokens.shape)}")
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise ParseError(f"expected integer token ids, got {tokens.dtype}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab.size):
            bad = int(tokens.max()) if int(tokens.max()) >= vocab.size else int(tokens.min())
            raise ParseError(f"token id {bad} is outside the vocabulary 0..{vocab.size - 1}")
        return tokens.long()
    if isinstance(texts, (list, tuple)):
        if not texts:
            raise ParseError("expected at least one sequence, got an empty list")
        rows = []
        for i, text in enumerate(texts):
            try:
                rows.append(parse(text, vocab))
            except ParseError as e:
                raise ParseError(f"sequence {i}: {e}") from None
        return torch.stack(rows)
    raise ParseError(f"expected a string, a list of strings or token ids, got {type(texts).__name__}")


def render(tokens, vocab: Vocab = VOCAB):
    """The text form of token ids: one sequence ([16] tensor or list of ids) gives a string, a batch
    ([B, 16] tensor or list of lists) a list of strings. The inverse of ``parse`` / ``to_tokens``, always
    in the full 16-word form."""
    if hasattr(tokens, "tolist") and not isinstance(tokens, list):
        if getattr(tokens, "ndim", 1) not in (1, 2):
            raise ParseError(f"render takes one sequence [T] or a batch [B, T], got shape {tuple(tokens.shape)}")
        tokens = tokens.tolist()
    if tokens and isinstance(tokens[0], (list, tuple)):
        return [" ".join(vocab.token_name(t) for t in row) for row in tokens]
    return " ".join(vocab.token_name(t) for t in tokens)
