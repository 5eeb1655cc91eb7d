"""How fast a sweep trains on this machine: steps/s per model for K models in one batched step
(``training/batched.py``, K = 1, 4, 16) and for ``--jobs 2`` single-thread processes side by side.

    python bench/sweep_speed.py [--batch-size 128] [--steps 4] [--ks 1,4,16] [--device cpu]

One step is the trainer's: each model's own batch (``Task.training_batch(seed, step)``), forward
through ``last_logits``, cross-entropy, backward, AdamW. Timed after one warm-up step, excluding
evaluation and checkpoints. "plain" is ``train``'s loop on one model (the reference); "jobs=2" runs that
loop in two spawned processes at once (1 torch thread each) and reports each one's rate and their sum.
Wall seconds move with other load on the machine; CPU seconds of the process move less.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F


def plain_rate(batch_size: int, steps: int, seed: int = 0, device: str = "cpu") -> tuple[float, float]:
    """(steps/s wall, steps/s CPU) of train()'s step on one model, one thread."""
    from assignadd import AssignAddTransformer, Task
    from assignadd.training.fast_forward import last_logits

    torch.set_num_threads(1)
    model = AssignAddTransformer(seed=seed).to(device)
    opt = torch.optim.AdamW(model.trainable_parameters, lr=1e-3, weight_decay=0.02, betas=(0.9, 0.999))
    task = Task()

    def step(i):
        tokens, labels = task.training_batch(seed, i, batch_size)
        loss = F.cross_entropy(last_logits(model, tokens.to(device), biases=False).float(), labels.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    step(0)
    w, c = time.perf_counter(), time.process_time()
    for i in range(1, steps + 1):
        step(i)
    return steps / (time.perf_counter() - w), steps / max(time.process_time() - c, 1e-9)


def batched_rate(k: int, batch_size: int, steps: int, device: str = "cpu") -> tuple[float, float]:
    """(steps/s per model wall, per model CPU) of ``training.batched``'s step on K models."""
    from assignadd.training.batched import _open_member, _Stack
    from assignadd.training.train import TrainConfig

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = [
            TrainConfig(seed=s, steps=steps + 1, batch_size=batch_size, eval_size=1, device=device) for s in range(k)
        ]
        members = [_open_member(Path(tmp) / f"m{s}", c, None)[0] for s, c in enumerate(cfgs)]
        stack = _Stack(members)

        def step(i):
            batches = [m.task.training_batch(m.cfg.seed, i, batch_size) for m in members]
            tokens = torch.stack([b[0] for b in batches]).to(device)
            labels = torch.stack([b[1] for b in batches]).to(device)
            return stack.step(tokens, labels, cfgs[0])

        step(0)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        w, c = time.perf_counter(), time.process_time()
        for i in range(1, steps + 1):
            step(i)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return steps / (time.perf_counter() - w), steps / max(time.process_time() - c, 1e-9)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=4, help="timed steps per variant")
    p.add_argument("--ks", default="1,4,16", help="batched K values")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-jobs", action="store_true", help="skip the two-process variant")
    args = p.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]

    rows = []  # (variant, models trained at once, steps/s per model wall, per model CPU)
    rows.append(("plain (train's loop)", 1, *plain_rate(args.batch_size, args.steps, device=args.device)))
    for k in ks:
        rows.append((f"batched K={k}", k, *batched_rate(k, args.batch_size, args.steps, args.device)))
    if not args.no_jobs and args.device == "cpu":
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
            futs = [pool.submit(plain_rate, args.batch_size, args.steps, s) for s in (0, 1)]
            rates = [f.result() for f in futs]
        rows.append(("jobs=2 processes", 2, sum(r[0] for r in rates) / 2, sum(r[1] for r in rates) / 2))

    print(
        f"sweep_speed: batch {args.batch_size}, {args.steps} timed steps, torch {torch.__version__}, "
        f"1 thread per process, device {args.device}, {platform.processor() or platform.machine()}"
    )
    print(f"{'variant':<22} {'models':>6} {'steps/s per model':>18} {'total steps/s':>14} {'per model per CPU-s':>20}")
    for name, n, w, c in rows:
        print(f"{name:<22} {n:>6} {w:>18.2f} {n * w:>14.2f} {c:>20.2f}")


if __name__ == "__main__":
    main()
