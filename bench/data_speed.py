"""How fast training batches are made: the vectorized ``Task.sample_batch`` against a per-sequence
pure-Python builder of the same distribution (SPEC §1.2, §1.3), both on one thread.

    python bench/data_speed.py [--batch-size 512] [--rounds 5]

Prints sequences/s for each and the ratio. Wall-clock figures on a shared machine move with its
load, so each builder is also timed in CPU seconds of this process (``time.process_time``), and the
two builders alternate within each round so that both see the same load.
"""

from __future__ import annotations

import argparse
import platform
import random
import time

import numpy as np
import torch

from assignadd import Task, parse, render
from assignadd.data.tokens import PREFIX_LEN

torch.set_num_threads(1)


class PythonBuilder:
    """SPEC §1.2-§1.3 one sequence at a time, with ``random.Random``: the baseline.

    The training table is a list of (kind, var, num1, num2) rows; each draw picks a row uniformly,
    then builds its sequence: n ~ U{1..6} distinct assignments (n >= 2 for 2-var), shuffled, and
    PREFIX_LEN - 2n (12 - 2n) PADs each dropped into one of the n + 1 gaps.
    """

    def __init__(self, task: Task, seed: int = 0):
        self.rng = random.Random(seed)
        v = task.vocab
        self.N, self.V = v.modulus, v.n_vars
        self.plus, self.eq, self.pad, self.first_var = v.plus, v.eq, v.pad, v.first_var
        never_lhs = {v.var_names.index(x) for x in task.config.never_lhs}
        never_rhs = {v.var_names.index(x) for x in task.config.never_rhs}
        self.valid_pairs = [
            (i, j) for i in range(self.V) for j in range(self.V) if i != j and i not in never_lhs and j not in never_rhs
        ]
        self.table = []
        for a, b in sorted(task.training_pairs):
            self.table += [("0var", x, a, b) for x in range(self.V)]
            self.table += [("lhs", x, a, b) for x in range(self.V) if x not in never_lhs]
            self.table += [("rhs", x, a, b) for x in range(self.V) if x not in never_rhs]
            self.table += [("2var", None, a, b)] * 10  # r = 1

    def sequence(self) -> tuple[list[int], int]:
        rng, N, V = self.rng, self.N, self.V
        kind, var, a, b = self.table[rng.randrange(len(self.table))]
        n = rng.randint(1, 6)
        if kind == "0var":
            required, core = [(var, rng.randrange(N))], (a, b)
        elif kind == "lhs":
            required, core = [(var, a)], (self.first_var + var, b)
        elif kind == "rhs":
            required, core = [(var, b)], (a, self.first_var + var)
        else:
            v1, v2 = self.valid_pairs[rng.randrange(len(self.valid_pairs))]
            required, core = [(v1, a), (v2, b)], (self.first_var + v1, self.first_var + v2)
            n = max(n, 2)
        used = {x for x, _ in required}
        others = rng.sample([x for x in range(V) if x not in used], n - len(required))
        assignments = required + [(x, rng.randrange(N)) for x in others]
        rng.shuffle(assignments)
        gaps = [0] * (n + 1)
        for _ in range(PREFIX_LEN - 2 * n):
            gaps[rng.randrange(n + 1)] += 1
        tokens = [self.pad] * gaps[0]
        for (x, value), after in zip(assignments, gaps[1:]):
            tokens += [self.first_var + x, value] + [self.pad] * after
        tokens += [self.plus, core[0], core[1], self.eq]
        return tokens, (a + b) % N

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        seqs = [self.sequence() for _ in range(size)]
        return torch.tensor([s for s, _ in seqs]), torch.tensor([y for _, y in seqs])


def timed(fn, repeats: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for ``repeats`` calls."""
    w, c = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        fn()
    return time.perf_counter() - w, time.process_time() - c


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--python-batches", type=int, default=4, help="Python batches per round")
    p.add_argument("--vector-batches", type=int, default=100, help="vectorized batches per round")
    args = p.parse_args(argv)

    task = Task()
    builder = PythonBuilder(task)
    rng = np.random.default_rng(0)
    # The baseline must make valid sequences of the task, or the comparison means nothing.
    for tokens in builder.batch(200)[0]:
        parse(render(tokens))

    B = args.batch_size
    results = {"python": [], "vectorized": []}
    for _ in range(args.rounds):
        results["python"].append(timed(lambda: builder.batch(B), args.python_batches))
        results["vectorized"].append(timed(lambda: task.sample_batch(B, rng), args.vector_batches))
    n_batches = {"python": args.python_batches, "vectorized": args.vector_batches}

    print(
        f"data_speed: batch {B}, {args.rounds} rounds, torch threads {torch.get_num_threads()}, "
        f"{platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    rate = {}
    for name, runs in results.items():
        seqs = n_batches[name] * B
        wall = max(seqs / w for w, _ in runs)  # best round: the least disturbed by other processes
        cpu = max(seqs / c for _, c in runs if c > 0)
        rate[name] = (wall, cpu)
        print(f"  {name:<11} {wall:>12,.0f} seq/s (wall, best round)   {cpu:>12,.0f} seq/s (CPU time)")
    print(
        f"  ratio vectorized / python: {rate['vectorized'][0] / rate['python'][0]:.1f}x (wall), "
        f"{rate['vectorized'][1] / rate['python'][1]:.1f}x (CPU time)"
    )


if __name__ == "__main__":
    main()
