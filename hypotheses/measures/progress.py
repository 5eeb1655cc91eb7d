"""Progress measures of one checkpoint: what ``assignadd-report`` draws along a training run (SPEC §4.5).

Per checkpoint: accuracy on every pool of SPEC §1.4 (and on each restricted (variable, slot) cell), the
authors' progress measures from weights and activations (``measures/circuits.py``), a linear probe of
the variable identity Layer 1 writes, and the ``whole_algorithm`` claim's two scrubs. ``MEASURES``
defines each as an equation; ``SeriesMeasurer`` builds the pools once (seed ``POOL_SEED``) and measures
any number of checkpoints on them. The report modules only find checkpoints, run this, and write files.
"""

from __future__ import annotations

import math

import torch

from ...data import POOL_NAMES, POS_LHS, POS_RHS, SEQ_LEN, Task, value_positions
from ...interventions import capture
from ...model import hooks
from ...random_streams import numpy_rng
from . import circuits
from .scrubbing import POOLS as SCRUB_POOLS  # whole_algorithm's pools
from .scrubbing import addition_scrub, routing_scrub

ROUND = 6  # decimals of a stored value
DEFAULT_N = 1000  # sequences per pool
POOL_SEED = 0  # the evaluation pools' seed: fixed, so two series are measured on the same sequences
ROUTING_POOL = "2var_train"  # activation measures read 2-var sequences: both operands come through variables
RESTRICTED_ROUTING_POOL = "2var_restricted_1"
RESTRICTED_CELLS_POOL = "1var_restricted_slot"

SCRUB_PER_POOL = 200

MEASURES = {
    **{f"acc_{p}": f"accuracy on the {p} pool: mean[argmax logits[-1] == (num1 + num2) mod 59]" for p in POOL_NAMES},
    "ov2_mlp2_accuracy": "weights only: mean over all 59^2 (a, b) of [argmax (h + MLP_2(h)) W_U == a + b], "
    "h = OV_2 e_a + OV_2 e_b",
    "positional_prev_token": "weights only: fraction of queries q in 1..11 of S = W_pos W_Q W_K^T W_pos^T (Layer 1) "
    "whose argmax over keys < q, excluding q-2, is q-1",
    "identity_qk_diagonal": "weights only: fraction of rows of M = (E_var OV_1) QK_2 (E_var OV_1)^T whose argmax "
    "is the diagonal (chance 1/12)",
    "identity_qk_margin": "weights only: mean over rows of M_ii - max_{j != i} M_ij",
    "prev_token_argmax": f"Layer-1 attention from prefix value tokens ({ROUTING_POOL}): fraction whose argmax key is t-1",
    "prev_token_weight": f"Layer-1 attention from prefix value tokens ({ROUTING_POOL}): mean weight on t-1",
    "layer1_eq_to_operand_slots": f"Layer-1 attention from `=` ({ROUTING_POOL}): fraction whose top-2 keys are "
    f"{{{POS_LHS}, {POS_RHS}}}",
    "layer2_eq_to_operand_values": f"Layer-2 attention from `=` ({ROUTING_POOL}): fraction whose top-2 keys are the "
    "operands' value positions",
    "layer2_eq_to_operand_values_restricted": f"the same on {RESTRICTED_ROUTING_POOL} (a variable in a forbidden slot)",
    "scrub_model_accuracy": f"the model's accuracy on the scrub set: the first {SCRUB_PER_POOL} sequences of each of "
    f"{', '.join(SCRUB_POOLS)}",
    "scrub_routing_accuracy": "accuracy on the scrub set with Layer 1's output at positions 0-14 resampled from cells "
    "that agree on (position, variable before a value token | token elsewhere): the "
    "whole_algorithm claim's routing scrub (SPEC §6)",
    "scrub_addition_accuracy": "accuracy on the scrub set with Layer 2's output at `=` patched from fresh sequences "
    "with the same operand values: the whole_algorithm claim's addition scrub",
    "variable_probe": f"held-out accuracy of a least-squares linear probe decoding the variable from "
    f"blocks.0.hook_attn_out at value positions ({ROUTING_POOL}, 50/50 split by sequence; "
    "chance 1/12)",
}


def least_squares_probe(
    X: torch.Tensor, y: torch.Tensor, train: torch.Tensor, n_classes: int, ridge: float = 1e-3
) -> float:
    """Held-out accuracy of a linear classifier fit in closed form: W = (X^T X + λI)^-1 X^T Y on one-hot Y
    (with a bias column). Linear like the logistic probe of SPEC §4.1, ~100x faster, and exactly
    deterministic."""
    test = ~train
    if not train.any() or not test.any():  # nothing to fit on, or nothing to score: no accuracy
        return math.nan
    X = torch.cat([X.double(), torch.ones(len(X), 1, dtype=torch.float64)], 1)  # (K, D+1)
    Y = torch.nn.functional.one_hot(y, n_classes).double()
    Xt, Yt = X[train], Y[train]
    A = Xt.T @ Xt + ridge * len(Xt) * torch.eye(X.shape[1], dtype=torch.float64)
    W = torch.linalg.solve(A, Xt.T @ Yt)  # (D+1, C)
    return float(((X[test] @ W).argmax(-1) == y[test]).double().mean())


def restricted_cells(task: Task, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """{measure name: rows of ``tokens`` (a 1var_restricted_slot pool)} for each variable in the operand
    slot that training never gave it: ``acc_restricted_<v>_in_lhs`` for the never-LHS variables,
    ``..._in_rhs`` for the never-RHS ones (the paper's task: a, b in RHS; k, l in LHS)."""
    V = task.vocab
    out = {}
    for slot, pos, variables in (("lhs", POS_LHS, task.never_lhs), ("rhs", POS_RHS, task.never_rhs)):
        for var in variables.tolist():
            out[f"acc_restricted_{V.var_names[var]}_in_{slot}"] = tokens[:, pos] == V.first_var + var
    return dict(sorted(out.items()))


def measure_definitions(task: Task) -> dict[str, str]:
    """``MEASURES`` and the task's per-cell restricted-slot measures (their names depend on the task)."""
    cells = restricted_cells(task, torch.zeros(0, SEQ_LEN, dtype=torch.long))
    return {
        **MEASURES,
        **{
            m: f"accuracy on the {RESTRICTED_CELLS_POOL} sequences whose {m.rsplit('_', 1)[1].upper()} "
            f"operand is variable {m.split('_')[2]}, a slot training never gave it: the "
            "restricted-slot phase cell by cell"
            for m in cells
        },
    }


class SeriesMeasurer:
    """Measures checkpoints on one task; builds the pools once and reuses them for every checkpoint."""

    def __init__(self, task: Task, n: int = DEFAULT_N, claims_n: int = 2000):
        self.task, self.n, self.claims_n = task, n, claims_n
        self.pools = {name: task.pool(name, n, seed=POOL_SEED) for name in POOL_NAMES}
        self._all_tokens = torch.cat([self.pools[p][0] for p in POOL_NAMES])
        self._all_labels = torch.cat([self.pools[p][1] for p in POOL_NAMES])
        tokens = self.pools[ROUTING_POOL][0]
        b, t = value_positions(tokens, task.vocab).nonzero(as_tuple=True)
        self._probe_index = (b, t)
        self._probe_labels = tokens[b, t - 1] - task.vocab.first_var
        in_train = torch.from_numpy(numpy_rng(POOL_SEED, "series identity probe split").random(len(tokens)) < 0.5)
        self._probe_train = in_train[b]
        self._claims_pools: dict = {}
        self._restricted_cells = restricted_cells(task, self.pools[RESTRICTED_CELLS_POOL][0])
        per_pool = min(n, SCRUB_PER_POOL)
        self._scrub = (
            torch.cat([self.pools[p][0][:per_pool] for p in SCRUB_POOLS]),
            torch.cat([self.pools[p][1][:per_pool] for p in SCRUB_POOLS]),
        )

    @torch.no_grad()
    def measure(self, model) -> dict[str, float]:
        v: dict[str, float] = {}

        def mean(x: torch.Tensor) -> float:
            return float(x.double().mean())

        # Batches of ~1000 sequences: larger ones fall out of cache and run slower on a CPU.
        correct = circuits.last_position_correct(model, self._all_tokens, self._all_labels, batch=1024)
        for i, name in enumerate(POOL_NAMES):
            v[f"acc_{name}"] = mean(correct[i * self.n : (i + 1) * self.n])
        # the restricted-slot phase cell by cell: each variable in the slot training never gave it
        i = POOL_NAMES.index(RESTRICTED_CELLS_POOL)
        ok = correct[i * self.n : (i + 1) * self.n]
        for measure, rows in self._restricted_cells.items():
            v[measure] = mean(ok[rows]) if rows.any() else math.nan
        v["ov2_mlp2_accuracy"] = circuits.ov2_mlp2_accuracy(model)[0]
        v["positional_prev_token"] = mean(circuits.positional_prev_token_rows(model))
        diag, margin = circuits.identity_qk_diagonal(model)
        v["identity_qk_diagonal"] = mean(diag)
        v["identity_qk_margin"] = mean(margin)

        # One hooked forward over both routing pools, stopped once Layer 2's pattern is read (the
        # Layer-2 MLP and the unembedding over all positions are most of a forward's cost).
        tokens, restricted = self.pools[ROUTING_POOL][0], self.pools[RESTRICTED_ROUTING_POOL][0]
        acts = capture(model, torch.cat([tokens, restricted]), [hooks.PATTERN_1, hooks.ATTN_OUT_1, hooks.PATTERN_2])
        k = len(tokens)
        p1, p2 = acts[hooks.PATTERN_1][:, 0], acts[hooks.PATTERN_2][:, 0]
        is_prev, weight = circuits.prev_token_attention(model, tokens, pattern1=p1[:k])
        v["prev_token_argmax"] = mean(is_prev)
        v["prev_token_weight"] = mean(weight)
        v["layer1_eq_to_operand_slots"] = mean(circuits.layer1_eq_to_operand_slots(model, tokens, p1[:k]))
        v["layer2_eq_to_operand_values"] = mean(circuits.layer2_eq_to_operand_values(model, tokens, p2[:k]))
        v["layer2_eq_to_operand_values_restricted"] = mean(
            circuits.layer2_eq_to_operand_values(model, restricted, p2[k:])
        )
        # when does the paper's algorithm explain the model? the whole_algorithm claim's two scrubs
        tokens, labels = self._scrub
        v["scrub_model_accuracy"] = mean(circuits.last_position_correct(model, tokens, labels, batch=1024))
        v["scrub_routing_accuracy"] = mean(
            routing_scrub(model, tokens, labels, seed=POOL_SEED, features="hypothesis")["correct"]
        )
        v["scrub_addition_accuracy"] = mean(
            addition_scrub(model, tokens, labels, self.task, seed=POOL_SEED, features="hypothesis")["correct"]
        )
        b, t = self._probe_index
        v["variable_probe"] = least_squares_probe(
            acts[hooks.ATTN_OUT_1][b, t], self._probe_labels, self._probe_train, self.task.vocab.n_vars
        )
        return {k: _round(x) for k, x in v.items()}

    def claims(self, model) -> dict[str, dict]:
        """Every registered per-checkpoint claim's verdict on this model (``run_all`` on a ``Context``)."""
        from ... import hypotheses

        # pools are per (name, size, seed): one cache shared by every checkpoint's context
        ctx = hypotheses.Context(model, self.task, n=self.claims_n, pools=self._claims_pools)
        return {
            r.claim: {"verdict": r.verdict, "reason": r.reason, "items": [item_numbers(e) for e in r.evidence]}
            for r in hypotheses.run_all(ctx)
        }


def item_numbers(e) -> dict:
    """An evidence item's numbers as a series keeps them at each checkpoint: enough to say which item
    moved a verdict between two checkpoints (status, value and interval, and each control's status and
    value), without the definitions and reasons that every checkpoint would repeat."""
    m = e.measurement.to_dict()
    controls = {name: c.to_dict() for name, c in sorted(e.controls.items())}
    return {
        "name": e.name,
        "kind": e.kind,
        "required": e.required,
        "threshold": {"value": _round(e.threshold.value), "direction": e.threshold.direction},
        "status": e.status,
        "value": m["value"],
        "ci": m["ci"],
        "controls": {name: {"status": e.control_status(name), "value": c["value"]} for name, c in controls.items()},
    }


def _round(x: float) -> float | None:
    """A measured value as series.json stores it: ``ROUND`` (6) decimals, NaN as None (JSON has no NaN).
    Rounding of stored values, not a text form: the pages format them with ``render.fmt`` and friends."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), ROUND)
