"""The re-initialised null of ``previous_token_head``'s ``ov1_transmits_variables``, draw by draw.

    python tools/ov1_null_draws.py [--draws 20]

The item is the share of 1,000 random placements of the variables' embeddings that Layer 1's OV passes on
less strongly than the variables' own place. On a Layer 1 that does not single the variables out that
share is uniform on [0, 1], whatever the shape: this prints it for ``--draws`` re-initialised models of
each shipped shape (``AssignAddTransformer(cfg, seed=10_000 + s)``, placements seed 0, the paper's
components), sorted, so that one can see the spread and how often a single draw clears the 0.99 bar
(docs/reregistrations/ov1_reinitialised_draws_2026-12-07.md).
"""

from __future__ import annotations

import argparse

import torch

from assignadd.hypotheses.measures.local import ov1_variables_against_placements
from assignadd.model import AssignAddTransformer, ModelConfig
from assignadd.model.components import PAPER

SHAPES = {"paper": ModelConfig(), "two heads of 64": ModelConfig(n_heads=2, d_head=64)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, cfg in SHAPES.items():
        shares = []
        for s in range(args.draws):
            model = AssignAddTransformer(cfg, seed=10_000 + s)
            below, _, _ = ov1_variables_against_placements(model, seed=0, components=PAPER)
            shares.append(float(below.double().mean()))
        above = sum(v >= 0.99 for v in shares)
        print(f"{name}: {', '.join(f'{v:.3f}' for v in sorted(shares))} ({above} of {args.draws} at 0.99 or more)")


if __name__ == "__main__":
    main()
