"""How many torch threads a training run uses, chosen by timing it on the machine at hand, as the
precision is (``training/precision.py``).

On an idle 2-core machine a second thread makes the bf16 step 1.8 times faster and the fp32 step 1.1
times (``bench/RESULTS.md``); on the same machine kept busy by other jobs (load 6-8), a step on two
threads ran ten times slower than on one, because each step waits for the thread the scheduler has put
aside. torch's default (every core) is right on the first machine and ruinous on the second, and the
machine's name says neither. So ``choose_threads``, once per run (a resumed run keeps its choice;
``--threads N``, one usable core and a GPU skip it), times the trainer's real step (its ``StepProbe``, at
the run's batch, in the precision chosen before, itself timed on one thread: ``training.train.open_run``)
on 1 thread and on every usable core (``measure``), and ``decide`` picks. The choice changes speed only:
1 and 2 threads train the same bits (``tests/test_train.py``), so a run resumed on other threads ends as
it would have.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch

from .precision import SPEEDUP_MARGIN, Choice, StepProbe, timed

# At the paper's batch a step takes 40-110 ms on an idle 2-core machine, so each thread count gets 2-6
# steps: enough to tell the 1.8x of native bf16 or the 10x loss of a loaded machine from the margin, not a
# 1.1x from a 1.2x (a wrong call there costs under 15%).
BUDGET_S = 0.6
COLD_LIMIT_S = 0.15  # a warm-up step this slow is its candidate's timing: no second step


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class ThreadChoice(Choice):
    """How many torch threads a run trains on, and why: written to ``run.json`` and logged."""

    chosen: int
    reason: str
    # "measured"; "given" (--threads, or a sweep's one thread per worker); "run folder" (a resumed run
    # keeps its choice); "one core" or "device" (nothing to measure: torch's threads are kept)
    source: str
    steps_per_s: dict = field(default_factory=dict)  # {"1": steps/s, "2": ...}: keys are thread counts
    batch_size: int | None = None  # the batch the steps were timed at (the run's)
    cores: int | None = None  # usable cores when measured
    load_average: list | None = None  # 1, 5, 15-minute load averages just before the measurement
    measured_on: str | None = None  # UTC time of the measurement
    measure_s: float | None = None  # its wall time (building the models excluded)

    @classmethod
    def given(cls, threads: int) -> "ThreadChoice":
        return cls(threads, "given", "given")

    @classmethod
    def kept(cls, threads: int) -> "ThreadChoice":
        """A resumed run that records its choice: kept, not measured again."""
        return cls(threads, f"resumed: run.json records {threads}, chosen when the run started", "run folder")

    def log_line(self) -> str:
        """One line for the run's log: ``threads: 1 (measured 6.20 steps/s against 0.61 with 2)``."""
        return f"threads: {self.chosen} ({self.reason})"


def recorded_threads(record) -> int | None:
    """The thread count a run.json's ``threads`` record holds; None: no usable record."""
    chosen = record.get("chosen") if isinstance(record, dict) else None
    return chosen if isinstance(chosen, int) and not isinstance(chosen, bool) and chosen >= 1 else None


# ----- the decision ------------------------------------------------------------------------------------
def decide(rates: dict[int, float]) -> tuple[int, str]:
    """``(threads, reason)`` from steps/s per thread count (1 among them): the fastest count whose rate is
    at least ``SPEEDUP_MARGIN`` times one thread's, else 1. One thread wins within the margin: it leaves
    the other cores to the machine's other work, and a machine that becomes busy later cannot make it ten
    times slower; torch's default of every core must earn its place."""
    one = rates[1]
    if len(rates) == 1:
        return 1, f"measured {_rate(one)} steps/s on the one thread timed"
    best = 1
    for n, r in sorted(rates.items()):
        if n > 1 and r >= SPEEDUP_MARGIN * one and r > rates[best]:
            best = n
    others = ", ".join(f"{_rate(r)} with {n}" for n, r in sorted(rates.items()) if n != best)
    reason = f"measured {_rate(rates[best])} steps/s against {others}"
    if best == 1 and any(one < r for r in rates.values()):
        reason += f": under the {SPEEDUP_MARGIN}x more threads must gain"
    return best, reason


def _rate(r: float) -> str:
    return f"{r:.2f}" if r < 100 else f"{r:.0f}"


# ----- the measurement ---------------------------------------------------------------------------------
def measure(
    steps: dict[int, Callable[[], object]],
    *,
    budget_s: float = BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
    set_threads: Callable[[int], None] = torch.set_num_threads,
) -> dict[int, float]:
    """Steps/s of each ``steps[threads]`` (a training step, run after ``set_threads(threads)``), one step
    of each in turn, so all see the same load, until ``budget_s`` has passed. A candidate's first step is
    a warm-up, or its timing where it took over ``COLD_LIMIT_S`` (a loaded machine's two-thread step).
    Every candidate gets at least one timed step, so a loaded machine's slow step may end past the budget."""
    count, spent = dict.fromkeys(steps, 0), dict.fromkeys(steps, 0.0)
    live = []
    start = clock()
    for n, step in steps.items():
        set_threads(n)
        _, cold = timed(step, clock)
        if cold > COLD_LIMIT_S:
            count[n], spent[n] = 1, cold
        else:
            live.append(n)
    while live:
        for n in live:
            set_threads(n)
            spent[n] += timed(steps[n], clock)[1]
            count[n] += 1
        if clock() - start >= budget_s:
            break
    return {n: count[n] / max(spent[n], 1e-9) for n in steps}


@contextmanager
def torch_threads(n: int):
    """torch on ``n`` threads inside the block, on the count it had before after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def choose_threads(
    probe: StepProbe, precision: str, *, cores: int | None = None, clock: Callable[[], float] = time.perf_counter
) -> ThreadChoice:
    """Time the probe's full-size step in ``precision`` on 1 thread and on ``cores`` (default: the usable
    cores) and decide (``decide``). torch's thread count is left as it was: the caller applies the choice."""
    cores = cores or usable_cores()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # an OS without load averages
        load = None
    with torch_threads(torch.get_num_threads()):  # measure sets its own counts
        steps = {n: probe.make(precision, "workload") for n in dict.fromkeys((1, cores))}
        t0 = clock()
        rates = measure(steps, clock=clock)
        took = clock() - t0
    chosen, reason = decide(rates)
    return ThreadChoice(
        chosen,
        reason,
        "measured",
        steps_per_s={str(n): round(r, 3) for n, r in rates.items()},
        batch_size=probe.workload.get("batch_size"),
        cores=cores,
        load_average=load,
        measured_on=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        measure_s=round(took, 3),
    )
