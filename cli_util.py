"""Small helpers shared by the command-line tools."""

from __future__ import annotations

import sys


def exit_bad_input(message: str) -> None:
    """One clear line on stderr and exit code 2: the contract for bad input or usage."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def retain_freed_memory() -> str:
    """Ask glibc's allocator to keep freed memory for reuse instead of handing it back to the kernel.

    By default glibc serves every allocation above its mmap threshold (128 KiB, raised up to 32 MiB as
    it goes) with a fresh mapping and unmaps it on free, so each new activation tensor of a claim's
    forward passes pays a page fault per 4 KiB page, and the kernel zeroes every page again
    (bench/verify_speed.py --compare-allocator measures what that costs). Raising the mmap and trim
    thresholds to 1 GiB keeps those pages in the heap, where the next tensor reuses them; they are
    returned at exit instead of after each free. The peak a process uses stays about the same (a
    fragmented heap can raise it a little: `assignadd-verify`'s largest resident set went from 1.10
    to 1.12-1.15 GB). The arithmetic is untouched: the same bits come out.

    For the command-line tools only (a library must not change its caller's allocator). Forked claim
    workers inherit the setting. ``ASSIGNADD_ALLOCATOR=system`` leaves glibc as it is. Returns what was
    done, for logs: "kept", "system (ASSIGNADD_ALLOCATOR)" or "system (not glibc)".
    """
    import os

    if os.environ.get("ASSIGNADD_ALLOCATOR", "").strip().lower() == "system":
        return "system (ASSIGNADD_ALLOCATOR)"
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl, Windows): nothing to ask
        return "system (not glibc)"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = all(
        mallopt(p, v) == 1
        for p, v in ((_M_MMAP_THRESHOLD, 1 << 30), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))
    )
    return "kept" if ok else "system (mallopt refused)"
