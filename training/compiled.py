"""The training step through ``torch.compile`` (``assignadd-train --compile``).

The eager step (``train.training_step``) spends about a quarter of its time outside its matrix
products: autograd's bookkeeping, copies, the softmax and ReLU as separate passes, AdamW's element-wise
update tensor by tensor. TorchInductor fuses those into generated C++ loops: the forward with its
backward (one compiled graph through AOTAutograd) and the optimizer's step (a second one). The
products stay the same library calls. ``bench/train_speed.py`` measures what that buys on the machine
at hand, against the eager step in the same run.

What it costs, and why it is not the default:
- a C++ compiler on the machine (Inductor builds its CPU kernels with one); ``check_compiler`` says so
  in one line before a run starts;
- the first step compiles: up to a minute on a machine that has never compiled it, a few seconds
  from Inductor's cache after that;
- other arithmetic: fused loops sum in another order than the eager kernels, so a compiled run is a
  different run (its ``run.json`` and checkpoints record it; a run folder refuses to resume in the
  other mode). Compiled runs are bit-reproducible: the kernels are generated deterministically
  (``torch.use_deterministic_algorithms``, on while the step runs), so a run resumed, or run with
  another number of threads, ends with the same weights (tests/test_train_compiled.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import warnings

import torch
import torch.nn.functional as F

from ..model.transformer import AssignAddTransformer
from .fast_forward import last_logits


def compiler() -> str | None:
    """The C++ compiler Inductor would use ($CXX, else c++, g++ or clang++ on PATH), or None."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def check_compiler() -> None:
    """Raise ``TrainError`` (one line) when the step cannot be compiled here."""
    from .train import TrainError

    if compiler() is None:
        raise TrainError(
            "--compile needs a C++ compiler (c++, g++ or clang++ on PATH, or $CXX): torch.compile builds "
            "its CPU kernels with one; install one, or train without --compile"
        )


def compile_step(model: AssignAddTransformer, opt: torch.optim.Optimizer, *, device: str, bf16: bool, biases: bool):
    """A function ``step(tokens, labels) -> loss`` doing what ``train.training_step`` does (fast-path
    forward, fp32 cross-entropy at the last position, backward, AdamW), with the forward-and-backward
    and the optimizer step compiled. Call it only inside ``compiled_mode()`` (the kernels are
    generated, and guarded, under its settings)."""
    from .train import _autocast

    # Dynamo caches compiled code per code object, at most ``recompile_limit`` (8) versions: every run's
    # ``loss_of`` and AdamW's ``step`` share one code object each, so from the ninth compiled run in a
    # process on, the step would silently run eager while the run records it as compiled. Starting
    # from an empty cache keeps each run compiled (Inductor's cache on disk makes it quick); other
    # compiled functions of the process compile again on their next call.
    torch.compiler.reset()

    def loss_of(tokens, labels):
        with _autocast(device, bf16):
            logits = last_logits(model, tokens, biases=biases)
        return F.cross_entropy(logits.float(), labels)

    loss_c = torch.compile(loss_of)
    opt_step_c = torch.compile(opt.step)

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = loss_c(tokens, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt_step_c()
        return loss

    return step


@contextlib.contextmanager
def compiled_mode():
    """Deterministic algorithms on (Inductor then generates kernels whose sums do not depend on the
    thread count); dynamo's warning about the profiler markers inside AdamW's step, and the deprecation
    warning Inductor's own use of ``torch.jit`` raises, quieted (true and harmless: no profiler runs,
    and nothing here calls ``torch.jit``); all restored after the block."""
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)
    torch.use_deterministic_algorithms(True)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=r".*torch\.jit\.script_method.* is deprecated", category=DeprecationWarning
            )
            yield
    finally:
        torch.use_deterministic_algorithms(was_deterministic, warn_only=warn_only)
        dynamo_log.setLevel(level)


def first_call_checked(step):
    """``step`` whose first call, where ``torch.compile`` compiles, turns any failure into a one-line
    ``CompileFailed`` (a ``TrainError``): a compiler that is there but cannot build (missing headers, a
    broken toolchain) must not end a run in a traceback."""
    from .train import CompileFailed

    first = [True]

    def checked(tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if not first[0]:
            return step(tokens, labels)
        try:
            loss = step(tokens, labels)
        except Exception as e:  # whatever Inductor raised: say it in one line
            line = (str(e).strip().splitlines() or [""])[0][:200]
            raise CompileFailed(
                f"--compile: torch.compile failed on this machine ({type(e).__name__}: {line}); train without --compile"
            ) from None
        first[0] = False
        return loss

    return checked


@contextlib.contextmanager
def compiled_training_step(
    model: AssignAddTransformer, opt: torch.optim.Optimizer, *, device: str, bf16: bool, biases: bool
):
    """``compile_step``'s function (its first call checked: ``first_call_checked``), inside
    ``compiled_mode()`` for the length of the block."""
    with compiled_mode():
        yield first_call_checked(compile_step(model, opt, device=device, bf16=bf16, biases=biases))
