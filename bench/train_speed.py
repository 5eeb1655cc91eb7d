"""How fast the training step runs on CPU: the fast path ``last_logits`` against the full-sequence
forward (the baseline), in fp32 and under bf16 autocast, on one thread; then what ``--precision auto``
decides here and what deciding costs.

    python bench/train_speed.py [--batch-size 512] [--steps 10] [--rounds 3]

One step is what ``training/train.py`` does: a fresh batch, forward, cross-entropy at the last position,
backward, AdamW. Prints steps/s for each variant and its ratio to the full fp32 forward. The variants
alternate within each round so that all see the same load; each is timed in wall seconds (best
round) and in CPU seconds of this process, which moves less with other processes on the machine.

Whether bf16 pays depends on the CPU: with native bf16 (AVX512-BF16, AMX) ``last_logits`` bf16 runs
about twice as fast as fp32; where bf16 is emulated (AVX2 only) about ten times slower. The last line
is ``training.precision.choose_precision`` measured as a run measures it.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F

from assignadd import AssignAddTransformer, Task
from assignadd.training.precision import cpu_name
from assignadd.training.fast_forward import last_logits

torch.set_num_threads(1)

VARIANTS = {
    # name: (fast path?, bf16 autocast?)
    "full fp32": (False, False),
    "last_logits fp32": (True, False),
    "full bf16": (False, True),
    "last_logits bf16": (True, True),
}
BASELINE = "full fp32"


def make_step(fast: bool, bf16: bool, batch_size: int):
    model = AssignAddTransformer(seed=0)
    opt = torch.optim.AdamW(model.trainable_parameters, lr=1e-3, weight_decay=0.02, betas=(0.9, 0.999))
    task = Task()
    state = {"step": 0}

    def step():
        tokens, labels = task.training_batch(run_seed=0, step=state["step"], batch_size=batch_size)
        state["step"] += 1
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with autocast:
            logits = last_logits(model, tokens, biases=False) if fast else model(tokens)[:, -1]
        loss = F.cross_entropy(logits.float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args(argv)
    steps = {name: make_step(*flags, args.batch_size) for name, flags in VARIANTS.items()}
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):
        for name, step in steps.items():
            w, c = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step()
            runs[name].append((time.perf_counter() - w, time.process_time() - c))

    print(
        f"train_speed: batch {args.batch_size}, {args.steps} steps x {args.rounds} rounds per variant, "
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"{cpu_name()}"
    )
    rate = {
        name: (max(args.steps / w for w, _ in r), max(args.steps / c for _, c in r if c > 0))
        for name, r in runs.items()
    }
    base = rate[BASELINE]
    for name, (wall, cpu) in rate.items():
        print(
            f"  {name:<17} {wall:6.2f} steps/s wall (best)  {cpu:6.2f} steps/s CPU   "
            f"x{wall / base[0]:.2f} wall  x{cpu / base[1]:.2f} CPU vs {BASELINE}"
        )
    print_peak_fraction(args.batch_size, {name: cpu for name, (_, cpu) in rate.items()})
    print_auto_decision(args.batch_size)


def step_gemms(batch: int, cfg) -> list[tuple[int, int, int, int]]:
    """The matrix products of one ``last_logits`` training step, as (batch of products, m, k, n):
    forward C = A (m x k) @ B (k x n), and for each its two backward products dA = dC @ B^T (m, n, k)
    and dB = A^T @ dC (k, m, n), summed over the batch where the weight is shared. The embedding
    gather, softmax, ReLU, masking and AdamW's element-wise update are not products."""
    B, T, D, M, V = batch, cfg.n_ctx, cfg.d_model, cfg.d_mlp, cfg.d_vocab_out
    forward = [
        (1, B * T, D, D),  # Layer 1: q, k and v, three products (training.fast_forward)
        (1, B * T, D, D),
        (1, B * T, D, D),
        (B, T, D, T),  # scores q k^T
        (B, T, T, D),  # pattern @ v
        (1, B * T, D, D),  # W_O
        (1, B, D, D),  # Layer 2: the last position's query
        (1, B * T, D, D),  # keys and values at every position, two products
        (1, B * T, D, D),
        (B, 1, D, T),  # the last query's scores
        (B, 1, T, D),  # its pattern @ v
        (1, B, D, D),  # W_O
        (1, B, D, M),  # MLP in
        (1, B, M, D),  # MLP out
        (1, B, D, V),  # unembedding
    ]
    out = []
    for b, m, k, n in forward:
        out += [(b, m, k, n), (b, m, n, k), (b, k, m, n)]
    return out


def gemm_seconds(shapes, dtype, reps: int = 20, wall: bool = False) -> float:
    """CPU seconds (``wall``: wall seconds) of the products ``shapes`` alone, each timed on its own (best
    of 3 x ``reps``)."""
    clock = time.perf_counter if wall else time.process_time
    total = 0.0
    for b, m, k, n in shapes:
        a = torch.randn(b, m, k).to(dtype) if b > 1 else torch.randn(m, k).to(dtype)
        w = torch.randn(b, k, n).to(dtype) if b > 1 else torch.randn(k, n).to(dtype)
        for _ in range(2):
            a @ w
        best = float("inf")
        for _ in range(3):
            c = clock()
            for _ in range(reps):
                a @ w
            best = min(best, (clock() - c) / reps)
        total += best
    return total


def print_peak_fraction(batch: int, cpu_rate: dict[str, float]) -> None:
    """How close the step runs to the machine's matrix-product speed, measured now: the step's own
    products timed alone (its floor), and a large square product (the machine's peak GFLOP/s)."""
    from assignadd import ModelConfig

    shapes = step_gemms(batch, ModelConfig())
    flops = sum(2 * b * m * k * n for b, m, k, n in shapes)
    for dtype, name in ((torch.float32, "last_logits fp32"), (torch.bfloat16, "last_logits bf16")):
        floor = gemm_seconds(shapes, dtype)
        big = torch.randn(1024, 1024).to(dtype)
        c = time.process_time()
        for _ in range(5):
            big @ big
        peak = 5 * 2 * 1024**3 / (time.process_time() - c) / 1e9
        for variant in [name]:
            step_s = 1 / cpu_rate[variant]
            print(
                f"  {variant}: {flops / 1e9:.2f} GFLOP of products per step; step {step_s * 1e3:.1f} ms CPU = "
                f"{flops / step_s / 1e9:.1f} GFLOP/s = {100 * floor / step_s:.0f}% of the peak at the step's own "
                f"shapes (its products timed alone: {floor * 1e3:.1f} ms, {flops / floor / 1e9:.1f} GFLOP/s), "
                f"{100 * flops / step_s / 1e9 / peak:.0f}% of a 1024^3 product's ({peak:.1f} GFLOP/s)"
            )


def print_auto_decision(batch_size: int) -> None:
    """``--precision auto`` as ``assignadd-train`` runs it."""
    from assignadd.data import Task
    from assignadd.training.precision import choose_precision
    from assignadd.training.train import TrainConfig, step_probe

    w, c = time.perf_counter(), time.process_time()
    choice = choose_precision("cpu", step_probe(TrainConfig(batch_size=batch_size), Task()))
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    print(
        f"  --precision auto: {choice.chosen}; deciding took {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"(steps {choice.measure_s:.2f} s); {choice.log_line()}"
    )


if __name__ == "__main__":
    main()
