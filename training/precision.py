"""Which arithmetic a training run uses, chosen by timing it on the machine at hand (the timing, the
choice's record and the machine's facts serve ``training/threads.py`` too).

A step under bf16 autocast is about twice as fast as fp32's on a CPU with native bf16 (AVX512-BF16, AMX)
and on most GPUs, and 8 to 11 times slower on a CPU that emulates it (AVX2 without bf16: its matmuls run
40 times slower than fp32's; ``bench/RESULTS.md``), so ``--precision auto`` (train's and sweep's default)
decides on the machine that runs, not from the device's name. ``choose_precision``, once per run (a
resumed run keeps its choice), times each candidate (fp32; bf16 autocast where the device has it) on the
trainer's real step, handed over as a ``StepProbe`` (nothing here knows the model):

1. **Scout**: a fresh model at a small batch. Its first step, from the same initial weights on the same
   batch for every candidate, is the **safety sample** (``check_safety``: it catches a path that
   overflows or is badly wrong at initialisation, not drift late in training); the next are timed. A
   candidate more than ``SCOUT_SLOWDOWN`` times slower than fp32 (an emulated path) stops here.
2. **Workload**: the others run at the run's own batch, where a GPU's bf16 gain shows, within the rest of
   ``BUDGET_S``. Skipped when the scout is the workload, or when one fp32 step at full size would not fit
   (predicted from the scout, or found on its first step): then the scout decides.
3. **Decide** (``decide``): a candidate slower than fp32 is never chosen, and a tie keeps the exact
   arithmetic.
"""

from __future__ import annotations

import math
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

import torch

PRECISIONS = ("fp32", "bf16")
REFERENCE = "fp32"  # exact arithmetic: what every other candidate is compared with, and the fallback

# About one second: small next to a run of 40k steps, and enough to separate a 2x gain or a 10x loss,
# the cases that matter, from noise.
BUDGET_S = 1.0
SCOUT_BATCH = 64  # small enough that a 40x-slower emulated step still costs well under a second
SCOUT_TIME_S = 0.1  # timed scout steps per candidate, after its safety sample
SCOUT_COLD_LIMIT_S = 0.25  # a safety-sample step this slow is its own timing: no second step
SCOUT_SLOWDOWN = 2.0  # a candidate at under 1/2 of fp32's scout steps/s is not timed at full size
# A short measurement on a loaded machine moves by about 10%: a candidate must gain more than that to be
# worth its cost (bf16's rounding error; more threads' exposure to a busy machine, training/threads.py).
SPEEDUP_MARGIN = 1.15
# bf16 keeps 8 bits of mantissa (relative rounding 2^-9 = 0.2%). At initialisation its loss agrees with
# fp32's to ~1e-6 relative and its gradient to ~2% (L2, batch 64-512, measured on CPU); 1% and 10%
# leave room for that and still catch an overflow or a wrong kernel.
LOSS_RTOL = 0.01
GRAD_RTOL = 0.10

StepFn = Callable[[], "tuple[float, list[torch.Tensor]]"]
T = TypeVar("T")


@dataclass
class StepProbe:
    """The training step to time. ``make(precision, size)`` builds a fresh model and optimizer (same seed
    every call) and returns a function that runs one real step on the next batch (the first: the same
    batch for every precision) and returns ``(loss, gradients)``, the loss as a float (so a GPU has
    finished). ``size`` is ``"scout"`` or ``"workload"``, each described by the attribute of its name
    (``{"step": ..., "models": K, "batch_size": B}``)."""

    make: Callable[[str, str], StepFn]
    scout: dict
    workload: dict


@dataclass
class Measurement:
    """One candidate's safety check and timings (steps/s at the probe's scout and workload sizes)."""

    precision: str
    safe: bool
    safety: str  # why it is safe or not, in words
    scout_steps_per_s: float | None = None  # None: not timed (unsafe)
    workload_steps_per_s: float | None = None  # None: not timed at full size


ChoiceT = TypeVar("ChoiceT", bound="Choice")


@dataclass
class Choice:
    """A measured setting's record, written to ``run.json`` as a dict and read back from one (keys it
    does not know are ignored)."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls: type[ChoiceT], d: dict) -> ChoiceT:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class PrecisionChoice(Choice):
    """What a run trains in and why: written to ``run.json`` and ``sweep.json`` and logged."""

    requested: str  # auto, fp32 or bf16
    chosen: str  # fp32 or bf16
    reason: str
    source: str  # "measured", "requested", or "run folder" (a resumed run keeps its arithmetic)
    steps_per_s: dict = field(default_factory=dict)  # {"scout": {candidate: steps/s}, "workload": {...}}
    sizes: dict = field(default_factory=dict)  # {"scout": {"batch_size": ...}, "workload": {...}}
    safety: dict = field(default_factory=dict)  # candidate -> its safety check, in words
    machine: dict = field(default_factory=dict)
    measured_on: str | None = None  # UTC time of the measurement
    measure_s: float | None = None  # the measurement's wall time (set-up before the first step excluded)

    @property
    def use_bf16(self) -> bool:
        return self.chosen == "bf16"

    @classmethod
    def given(cls, precision: str) -> "PrecisionChoice":
        return cls(requested=precision, chosen=precision, reason=f"--precision {precision} given", source="requested")

    @classmethod
    def kept(cls, chosen: str, reason: str) -> "PrecisionChoice":
        """``auto`` in a folder that records its decision: kept, not measured again."""
        return cls(requested="auto", chosen=chosen, reason=reason, source="run folder")

    def log_line(self) -> str:
        """One line for the run's log: ``precision bf16 (auto, measured now; steps/s at ...; reason)``."""
        if self.source in ("requested", "run folder"):
            return f"precision {self.chosen} ({self.reason})"
        timings = []
        for size in ("workload", "scout"):
            rates = self.steps_per_s.get(size) or {}
            if rates and not (size == "scout" and self.sizes.get("scout") == self.sizes.get("workload")):
                shape = self.sizes.get(size, {})
                each = ", ".join(f"{p} {r:.2f}" if r is not None else f"{p} not timed" for p, r in rates.items())
                timings.append(f"{shape.get('models', 1)} x batch {shape.get('batch_size')}: {each}")
        return f"precision {self.chosen} (auto, measured now; steps/s at {'; at '.join(timings)}; {self.reason})"


# ----- the decision ------------------------------------------------------------------------------------
def check_safety(loss: float, grads: list, ref_loss: float, ref_grads: list) -> tuple[bool, str]:
    """Is a candidate's safety sample close to fp32's on the same batch from the same weights? Yes when loss
    and every gradient entry are finite, ``|L - L_fp32| <= LOSS_RTOL * |L_fp32|`` and ``||g - g_fp32||_2 <=
    GRAD_RTOL * ||g_fp32||_2`` over all trainable parameters together."""
    if not math.isfinite(loss):
        return False, f"loss is {loss}"
    g = torch.cat([x.detach().float().flatten().cpu() for x in grads])
    g_ref = torch.cat([x.detach().float().flatten().cpu() for x in ref_grads])
    if not torch.isfinite(g).all():
        return False, f"{int((~torch.isfinite(g)).sum())} gradient entries are not finite"
    loss_rel = abs(loss - ref_loss) / max(abs(ref_loss), 1e-12)
    grad_rel = ((g - g_ref).norm() / g_ref.norm().clamp_min(1e-12)).item()
    if loss_rel > LOSS_RTOL:
        return False, f"loss off by {loss_rel:.1e} of fp32's (more than {LOSS_RTOL})"
    if grad_rel > GRAD_RTOL:
        return False, f"gradient off by {grad_rel:.1e} of fp32's (L2, more than {GRAD_RTOL})"
    return True, f"loss within {loss_rel:.1e}, gradient within {grad_rel:.1e} of fp32's (relative)"


def decide(measurements: dict[str, Measurement]) -> tuple[str, str]:
    """``(chosen precision, reason)``: fp32 unless a safe candidate ran at ``>= SPEEDUP_MARGIN`` times
    fp32's steps/s; of those, the fastest. Rates are compared at the same size: the workload's where
    both were timed there, else the scout's."""
    ref = measurements[REFERENCE]
    if not ref.safe or not ref.scout_steps_per_s:
        return REFERENCE, f"fp32's own step did not time or was not finite ({ref.safety}); fp32 kept"
    best, best_ratio, notes = REFERENCE, 1.0, []
    for name, m in measurements.items():
        if name == REFERENCE:
            continue
        if not m.safe:
            notes.append(f"{name} not safe: {m.safety}")
            continue
        if m.workload_steps_per_s and ref.workload_steps_per_s:
            ratio = m.workload_steps_per_s / ref.workload_steps_per_s
        else:
            ratio = m.scout_steps_per_s / ref.scout_steps_per_s
        if ratio < SPEEDUP_MARGIN:
            verdict = "slower than fp32" if ratio < 1 else f"under the {SPEEDUP_MARGIN}x needed"
            notes.append(f"{name} runs at {ratio:.2f}x fp32's steps/s ({verdict})")
        else:
            notes.append(f"{name} runs at {ratio:.2f}x fp32's steps/s and is safe ({m.safety})")
            if ratio > best_ratio:
                best, best_ratio = name, ratio
    return best, "; ".join(notes) or "no other precision on this device"


# ----- the measurement ---------------------------------------------------------------------------------
def timed(step: Callable[[], T], clock: Callable[[], float]) -> tuple[T, float]:
    """What one ``step()`` returns, and the seconds it took."""
    t0 = clock()
    result = step()
    return result, clock() - t0


def measure(
    probe: StepProbe,
    candidates=PRECISIONS,
    *,
    budget_s: float = BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Measurement]:
    """Check and time the probe's step for each candidate: scout, then workload (the module's docstring)."""
    if candidates[0] != REFERENCE:
        raise ValueError(f"the first candidate must be {REFERENCE}, got {list(candidates)}")
    start = None
    out: dict[str, Measurement] = {}
    ref_loss, ref_grads = None, None
    for name in candidates:
        step = probe.make(name, "scout")
        start = clock() if start is None else start  # the budget counts steps, not the set-up before them
        (loss, grads), cold = timed(step, clock)  # the safety sample: first batch, initial weights
        if name == REFERENCE:
            ref_loss, ref_grads = loss, grads
            safe, why = (True, "the reference") if math.isfinite(loss) else (False, f"loss is {loss}")
        else:
            safe, why = check_safety(loss, grads, ref_loss, ref_grads)
        # A slow safety sample is its own timing (an upper bound on the speed: it includes the first call's
        # set-up), so an emulated path costs one step.
        out[name] = Measurement(name, safe, why)
        if safe:
            rate = 1.0 / cold if cold > SCOUT_COLD_LIMIT_S else _timed_rate(step, SCOUT_TIME_S, clock)
            out[name].scout_steps_per_s = rate
        elif name == REFERENCE:
            return out
    if probe.scout == probe.workload:
        for m in out.values():
            m.workload_steps_per_s = m.scout_steps_per_s
        return out
    ref_rate = out[REFERENCE].scout_steps_per_s
    finalists = [n for n in candidates if out[n].safe and out[n].scout_steps_per_s * SCOUT_SLOWDOWN >= ref_rate]
    if len(finalists) < 2:
        return out
    # fp32's full-size step if its time grew in proportion to the sequences (an upper bound where the
    # scout is launch-bound, as on a GPU; about right on a CPU): one that cannot fit is not started.
    scale = _sequences(probe.workload) / _sequences(probe.scout)
    if scale / ref_rate > budget_s - (clock() - start):
        return out
    for i, name in enumerate(finalists):  # fp32 first
        step = probe.make(name, "workload")
        _, cold = timed(step, clock)  # warm-up at full size
        left = budget_s - (clock() - start)
        if name == REFERENCE and cold > left / 2:
            return out  # a full-size step does not fit in the budget: the scout decides
        out[name].workload_steps_per_s = _timed_rate(step, max(left, 0.0) / (len(finalists) - i), clock)
    return out


def _sequences(size: dict) -> int:
    return int(size.get("models", 1)) * int(size.get("batch_size", 1))


def _timed_rate(step: StepFn, seconds: float, clock) -> float:
    """Steps per second of ``step``, run until ``seconds`` have passed (at least once)."""
    n, t0 = 0, clock()
    while True:
        step()
        n += 1
        elapsed = clock() - t0
        if elapsed >= seconds:
            return n / max(elapsed, 1e-9)


def candidates_for(device: str) -> tuple[str, ...]:
    """fp32, and bf16 where the device can autocast to it (CPU always, possibly emulated; CUDA when
    ``torch.cuda.is_bf16_supported()``)."""
    if device.startswith("cuda"):
        return ("fp32", "bf16") if torch.cuda.is_bf16_supported() else ("fp32",)
    return PRECISIONS


# ----- the machine -------------------------------------------------------------------------------------
def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``sysctl`` on macOS), else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            sysctl = ["sysctl", "-n", "machdep.cpu.brand_string"]
            brand = subprocess.run(sysctl, capture_output=True, text=True, timeout=5).stdout.strip()
            return brand or platform.machine()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def machine_identity(device: str) -> dict:
    """The machine a decision was measured on, for the run's record."""
    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"
    return {
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "device": f"{device} ({name})" if name != "cpu" else "cpu",
        "threads": torch.get_num_threads(),
    }


def choose_precision(
    device: str, probe: StepProbe, *, candidates=None, clock: Callable[[], float] = time.perf_counter
) -> PrecisionChoice:
    """``--precision auto``: a new measurement (``measure`` then ``decide``, about ``BUDGET_S``)."""
    # A process's first model and optimizer pay a one-time set-up that the run pays anyway (AdamW's first
    # imports torch._dynamo: about a second on a loaded 2-core machine): paid here, it is not measured.
    probe.make(REFERENCE, "scout")
    t0 = clock()
    measurements = measure(probe, candidates or candidates_for(device), clock=clock)
    chosen, reason = decide(measurements)
    rates: dict[str, dict[str, float]] = {"scout": {}, "workload": {}}
    for n, m in measurements.items():
        for size, rate in (("scout", m.scout_steps_per_s), ("workload", m.workload_steps_per_s)):
            if rate is not None:
                rates[size][n] = round(rate, 3)
    return PrecisionChoice(
        requested="auto",
        chosen=chosen,
        reason=reason,
        source="measured",
        steps_per_s=rates,
        sizes={"scout": probe.scout, "workload": probe.workload},
        safety={n: m.safety for n, m in measurements.items()},
        machine=machine_identity(device),
        measured_on=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        measure_s=round(clock() - t0, 3),
    )
