"""Small functions shared by the command-line tools."""

from __future__ import annotations

import sys


def exit_bad_input(message: str) -> None:
    """One clear line on stderr and exit code 2: the contract for bad input or usage."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
