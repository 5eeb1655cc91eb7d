"""A checkpoint series turned into curves (SPEC §4.5): per checkpoint, every pool's accuracy, the
authors' progress measures and each registered claim's verdict; then the learning phases.

Reading a folder. A run folder of ``assignadd-train`` (``checkpoints/step_NNNNNN.pt`` and
``final.pt``), or any folder of checkpoints in either format of SPEC §2.4, named as we name them
(``step_NNNNNN.pt``: after N steps) or as the paper's authors do (``checkpoint_step_N.pth``: after N
optimizer steps, every 100 from 1); ``final.pt`` / ``model_state_dict.pth`` are the last. Ordered by
step. Other files are ignored.

Speed. The pools and the task are built once per process and reused for every checkpoint; accuracy
goes through ``model.last_logits`` (the last position only); the probe is a closed-form least-squares
classifier; ``jobs`` spreads checkpoints over processes with one torch thread each. Every process
computes in one thread, so the numbers do not depend on ``jobs``.
"""
from __future__ import annotations

import json
import math
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..data import POOL_NAMES, POS_LHS, POS_RHS, SEQ_LEN, Task, TaskConfig, value_positions
from ..fileio import sha256_file
from ..hypotheses.learning_phases import SERIES_REGISTRY, detect_phases
from ..hypotheses.measures import circuits
from ..model import hooks
from ..model.checkpoint import CheckpointError, load_checkpoint_full, read_checkpoint_file

SCHEMA = "assignadd.series/1"
ROUND = 6
POOL_SEED = 0  # the evaluation pools' seed: fixed, so two series are measured on the same sequences
DEFAULT_N = 1000
DEFAULT_CLAIMS = 8  # checkpoints on which every registered claim runs (see compute_series)
ROUTING_POOL = "2var_train"  # activation measures read 2-var sequences: both operands come through variables
RESTRICTED_ROUTING_POOL = "2var_restricted_1"
RESTRICTED_CELLS_POOL = "1var_restricted_slot"

SCRUB_POOLS = ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair", "1var_restricted_slot",
               "2var_restricted_1")  # whole_algorithm's pools
SCRUB_PER_POOL = 200

OURS = re.compile(r"^step_(\d+)\.pt$")
AUTHORS = re.compile(r"^checkpoint_step_(\d+)\.pth$")
FINAL_NAMES = ("final.pt", "model_state_dict.pth")

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


class SeriesError(ValueError):
    """A folder that holds no usable checkpoint series; the message is one line."""


@dataclass(frozen=True)
class Entry:
    path: Path
    step: int
    step_from: str  # "file name", "checkpoint metadata" or "inferred"


def _step_of_final(path: Path) -> int | None:
    try:
        obj = read_checkpoint_file(path)
    except Exception:
        return None  # load_checkpoint_full reports it properly later
    step = obj.get("step") if isinstance(obj, dict) else None
    return int(step) if isinstance(step, int) and not isinstance(step, bool) else None


def find_checkpoints(path) -> list[Entry]:
    """The checkpoints of a run folder or a plain folder, ordered by step."""
    root = Path(path)
    if not root.exists():
        raise SeriesError(f"{root}: no such folder")
    if not root.is_dir():
        raise SeriesError(f"{root}: not a folder (expected a run folder or a folder of checkpoints)")
    folders = [root]
    if (root / "checkpoints").is_dir():
        folders.insert(0, root / "checkpoints")
    numbered: dict[int, Path] = {}
    finals: list[Path] = []
    for folder in folders:
        for f in sorted(folder.iterdir()):
            if not f.is_file():
                continue
            m = OURS.match(f.name) or AUTHORS.match(f.name)
            if m:
                step = int(m.group(1))
                if step in numbered:
                    raise SeriesError(f"{root}: two checkpoints for step {step}: {numbered[step].name} and {f.name}")
                numbered[step] = f
            elif f.name in FINAL_NAMES:
                finals.append(f)
    entries = [Entry(p, s, "file name") for s, p in sorted(numbered.items())]
    if len(finals) > 1:
        raise SeriesError(f"{root}: more than one final checkpoint ({', '.join(f.name for f in finals)})")
    if finals:
        f = finals[0]
        step = _step_of_final(f)
        last = entries[-1].step if entries else None
        if step is not None:
            if last is None or step > last:
                entries.append(Entry(f, step, "checkpoint metadata"))
            # a final checkpoint at the last numbered step duplicates it: keep the numbered one
        else:
            # The authors' final state dict has no step: one checkpoint interval after the last.
            gap = int(np.median(np.diff([e.step for e in entries]))) if len(entries) > 1 else 1
            entries.append(Entry(f, (last + gap) if last is not None else 0, "inferred"))
    if not entries:
        raise SeriesError(f"{root}: no checkpoints (expected step_NNNNNN.pt, checkpoint_step_N.pth, final.pt "
                          "or model_state_dict.pth)")
    return entries


def thin(entries: list[Entry], every: int) -> list[Entry]:
    """Every ``every``-th checkpoint in step order, the last one always included."""
    if every < 1:
        raise SeriesError(f"--every must be at least 1, got {every}")
    keep = entries[::every]
    if keep[-1] is not entries[-1]:
        keep.append(entries[-1])
    return keep


def least_squares_probe(X: torch.Tensor, y: torch.Tensor, train: torch.Tensor, n_classes: int,
                        ridge: float = 1e-3) -> float:
    """Held-out accuracy of a linear classifier fit in closed form: W = (X^T X + λI)^-1 X^T Y on one-hot Y
    (with a bias column). Linear like the logistic probe of SPEC §4.1, ~100x faster, and exactly
    deterministic."""
    X = torch.cat([X.double(), torch.ones(len(X), 1, dtype=torch.float64)], 1)  # (K, D+1)
    Y = torch.nn.functional.one_hot(y, n_classes).double()
    Xt, Yt = X[train], Y[train]
    A = Xt.T @ Xt + ridge * len(Xt) * torch.eye(X.shape[1], dtype=torch.float64)
    W = torch.linalg.solve(A, Xt.T @ Yt)  # (D+1, C)
    test = ~train
    if not test.any():
        return math.nan
    return float(((X[test] @ W).argmax(-1) == y[test]).double().mean())


def restricted_cells(task: Task, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """{measure name: rows of ``tokens`` (a 1var_restricted_slot pool)} for each variable in the operand
    slot that training never gave it: ``acc_restricted_<v>_in_lhs`` for the never-LHS variables,
    ``..._in_rhs`` for the never-RHS ones (the paper's task: a, b in RHS; k, l in LHS)."""
    V = task.vocab
    names = [chr(ord("a") + i) for i in range(V.n_vars)]
    out = {}
    for slot, pos, variables in (("lhs", POS_LHS, task.never_lhs), ("rhs", POS_RHS, task.never_rhs)):
        for var in variables.tolist():
            out[f"acc_restricted_{names[var]}_in_{slot}"] = tokens[:, pos] == V.first_var + var
    return dict(sorted(out.items()))


def measure_definitions(task: Task) -> dict[str, str]:
    """``MEASURES`` and the task's per-cell restricted-slot measures (their names depend on the task)."""
    cells = restricted_cells(task, torch.zeros(0, SEQ_LEN, dtype=torch.long))
    return {**MEASURES, **{m: f"accuracy on the {RESTRICTED_CELLS_POOL} sequences whose {m.rsplit('_', 1)[1].upper()} "
                              f"operand is variable {m.split('_')[2]}, a slot training never gave it: the "
                              "restricted-slot phase cell by cell" for m in cells}}


class SeriesMeasurer:
    """Measures checkpoints on one task; builds the pools once and reuses them for every checkpoint."""

    def __init__(self, task: Task, n: int = DEFAULT_N, claims_n: int = 2000):
        self.task, self.n, self.claims_n = task, n, claims_n
        self.pools = {name: task.pool(name, n, seed=POOL_SEED) for name in POOL_NAMES}
        self._all_tokens = torch.cat([self.pools[p][0] for p in POOL_NAMES])
        self._all_labels = torch.cat([self.pools[p][1] for p in POOL_NAMES])
        tokens = self.pools[ROUTING_POOL][0]
        b, t = value_positions(tokens).nonzero(as_tuple=True)
        self._probe_index = (b, t)
        self._probe_labels = tokens[b, t - 1] - task.vocab.first_var
        in_train = torch.from_numpy(np.random.default_rng([POOL_SEED, 7]).random(len(tokens)) < 0.5)
        self._probe_train = in_train[b]
        self._claims_pools: dict = {}
        self._restricted_cells = restricted_cells(task, self.pools[RESTRICTED_CELLS_POOL][0])
        per_pool = min(n, SCRUB_PER_POOL)
        self._scrub = (torch.cat([self.pools[p][0][:per_pool] for p in SCRUB_POOLS]),
                       torch.cat([self.pools[p][1][:per_pool] for p in SCRUB_POOLS]))

    @torch.no_grad()
    def measure(self, model) -> dict[str, float]:
        v: dict[str, float] = {}
        # Batches of ~1000 sequences: larger ones fall out of cache and run slower on a CPU.
        correct = torch.cat([model.last_logits(x).argmax(-1) for x in self._all_tokens.split(1024)]) == self._all_labels
        for i, name in enumerate(POOL_NAMES):
            v[f"acc_{name}"] = float(correct[i * self.n:(i + 1) * self.n].double().mean())
        # the restricted-slot phase cell by cell: each variable in the slot training never gave it
        i = POOL_NAMES.index(RESTRICTED_CELLS_POOL)
        ok = correct[i * self.n:(i + 1) * self.n]
        for measure, rows in self._restricted_cells.items():
            v[measure] = float(ok[rows].double().mean()) if rows.any() else math.nan
        v["ov2_mlp2_accuracy"] = circuits.ov2_mlp2_accuracy(model)[0]
        v["positional_prev_token"] = float(circuits.positional_prev_token_rows(model).double().mean())
        diag, margin = circuits.identity_qk_diagonal(model)
        v["identity_qk_diagonal"] = float(diag.double().mean())
        v["identity_qk_margin"] = float(margin.double().mean())

        # One hooked forward over both routing pools, stopped once Layer 2's pattern is read (the
        # Layer-2 MLP and the unembedding over all positions are most of a forward's cost).
        tokens, restricted = self.pools[ROUTING_POOL][0], self.pools[RESTRICTED_ROUTING_POOL][0]
        acts = _forward_until_layer2_pattern(model, torch.cat([tokens, restricted]))
        k = len(tokens)
        p1, p2 = acts[hooks.PATTERN_1][:, 0], acts[hooks.PATTERN_2][:, 0]
        is_prev, weight = circuits.prev_token_attention(model, tokens, pattern1=p1[:k])
        v["prev_token_argmax"] = float(is_prev.double().mean())
        v["prev_token_weight"] = float(weight.double().mean())
        v["layer1_eq_to_operand_slots"] = float(
            circuits.layer1_eq_to_operand_slots(model, tokens, p1[:k]).double().mean())
        v["layer2_eq_to_operand_values"] = float(
            circuits.layer2_eq_to_operand_values(model, tokens, p2[:k]).double().mean())
        v["layer2_eq_to_operand_values_restricted"] = float(
            circuits.layer2_eq_to_operand_values(model, restricted, p2[k:]).double().mean())
        # when does the paper's algorithm explain the model? the whole_algorithm claim's two scrubs
        from ..hypotheses.measures.scrubbing import addition_scrub, routing_scrub

        tokens, labels = self._scrub
        v["scrub_model_accuracy"] = float((torch.cat([model.last_logits(x).argmax(-1) for x in tokens.split(1024)])
                                           == labels).double().mean())
        v["scrub_routing_accuracy"] = float(routing_scrub(model, tokens, labels, seed=POOL_SEED,
                                                          features="hypothesis")["correct"].double().mean())
        v["scrub_addition_accuracy"] = float(addition_scrub(model, tokens, labels, self.task, seed=POOL_SEED,
                                                            features="hypothesis")["correct"].double().mean())
        b, t = self._probe_index
        v["variable_probe"] = least_squares_probe(acts[hooks.ATTN_OUT_1][b, t], self._probe_labels,
                                                  self._probe_train, self.task.vocab.n_vars)
        return {k: _round(x) for k, x in v.items()}

    def claims(self, model) -> dict[str, dict]:
        """Every registered per-checkpoint claim's verdict on this model (``run_all`` on a ``Context``)."""
        from .. import hypotheses

        # pools are per (name, size, seed): one cache shared by every checkpoint's context
        ctx = hypotheses.Context(model, self.task, n=self.claims_n, pools=self._claims_pools)
        return {r.claim: {"verdict": r.verdict, "reason": r.reason} for r in hypotheses.run_all(ctx)}


def _forward_until_layer2_pattern(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Layer 1's pattern and output and Layer 2's pattern from the hooked forward, which is stopped
    right after Layer 2's pattern (nothing later is needed)."""
    from ..interventions import capture

    return capture(model, tokens, [hooks.PATTERN_1, hooks.ATTN_OUT_1, hooks.PATTERN_2])


def _round(x: float) -> float | None:
    """A measured value as series.json stores it: ``ROUND`` (6) decimals, NaN as None (JSON has no NaN).
    Rounding of stored values, not a text form: the pages format them with ``render.fmt`` and friends."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), ROUND)


# ----- the worker: one measurer per process, reused for every checkpoint it is given -----------
_MEASURER: SeriesMeasurer | None = None


def _init_worker(task_config: dict, n: int, claims_n: int) -> None:
    global _MEASURER
    torch.set_num_threads(1)
    _MEASURER = SeriesMeasurer(Task(**TaskConfig.from_dict(task_config).__dict__), n, claims_n)


def _measure_one(path: str, with_claims: bool) -> dict:
    try:
        model, meta = load_checkpoint_full(path)
    except CheckpointError as e:
        return {"error": str(e)}
    if model.cfg.d_vocab != _MEASURER.task.vocab.size or model.cfg.d_vocab_out != _MEASURER.task.vocab.modulus:
        return {"error": f"{path}: model vocabulary ({model.cfg.d_vocab}, {model.cfg.d_vocab_out}) does not match "
                         f"the series' task ({_MEASURER.task.vocab.size}, {_MEASURER.task.vocab.modulus})"}
    out = {"values": _MEASURER.measure(model)}
    if with_claims:
        out["claims"] = _MEASURER.claims(model)
    return out


def _task_config(root: Path, entries: list[Entry]) -> TaskConfig:
    """The series' task: run.json of a run folder, else the checkpoints' own metadata, else the paper's."""
    run_json = root / "run.json"
    if run_json.is_file():
        try:
            return TaskConfig.from_dict(json.loads(run_json.read_text())["task"])
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise SeriesError(f"{run_json}: cannot read the task from it ({type(e).__name__}: {e})") from None
    for e in (entries[0], entries[-1]):
        try:
            obj = read_checkpoint_file(e.path)
        except Exception:
            continue  # reported when the file is measured
        if isinstance(obj, dict) and isinstance(obj.get("task"), dict):
            return TaskConfig.from_dict(obj["task"])
    return TaskConfig()


def claim_indices(n_checkpoints: int, n_claims: int) -> list[int]:
    """``n_claims`` checkpoint indices spread evenly over the series, the first and the last included
    (the last alone for 1; none for 0)."""
    if n_claims <= 0 or n_checkpoints == 0:
        return []
    if n_claims == 1 or n_checkpoints == 1:
        return [n_checkpoints - 1]
    return sorted({round(i * (n_checkpoints - 1) / (n_claims - 1)) for i in range(n_claims)})


def compute_series(path, *, every: int = 1, jobs: int = 1, n: int = DEFAULT_N, claims: int = DEFAULT_CLAIMS,
                   claims_n: int = 2000, progress: bool = True) -> dict:
    """The ``assignadd.series/1`` document of a folder of checkpoints (see the module docstring).

    ``claims``: on how many checkpoints (evenly spread, first and last included) to run every
    registered claim: a claim run with its controls and interventions costs tens of CPU-seconds, the
    curves under one. Raises ``SeriesError`` (one line) for bad input; nothing is written here.
    """
    if n < 10:
        raise SeriesError(f"--n must be at least 10, got {n}")
    if jobs < 1:
        raise SeriesError(f"--jobs must be at least 1, got {jobs}")
    if claims < 0:
        raise SeriesError(f"--claims must be 0 (none) or positive, got {claims}")
    root = Path(path)
    entries = thin(find_checkpoints(root), every)
    task_cfg = _task_config(root, entries)
    chosen = set(claim_indices(len(entries), claims))
    with_claims = [i in chosen for i in range(len(entries))]
    args = (task_cfg.to_dict(), n, claims_n)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(entries), desc="assignadd-report", unit="ckpt", dynamic_ncols=True)
    results: list[dict | None] = [None] * len(entries)

    def take(i: int, result: dict) -> None:  # the result of entries[i], from this process or a worker
        results[i] = result
        if "error" in result:
            raise SeriesError(result["error"])
        if bar is not None:
            bar.update(1)

    try:
        if jobs == 1:
            old_threads = torch.get_num_threads()
            try:
                _init_worker(*args)
                for i, e in enumerate(entries):
                    take(i, _measure_one(str(e.path), with_claims[i]))
            finally:
                torch.set_num_threads(old_threads)
        else:
            import multiprocessing as mp
            with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                     initargs=args) as pool:
                futures = {pool.submit(_measure_one, str(e.path), with_claims[i]): i for i, e in enumerate(entries)}
                from concurrent.futures import as_completed
                try:
                    for fut in as_completed(futures):
                        take(futures[fut], fut.result())
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    finally:
        if bar is not None:
            bar.close()

    checkpoints = []
    for e, r in zip(entries, results):
        rec = {"step": e.step, "file": str(e.path.relative_to(root)), "step_from": e.step_from,
               "sha256": sha256_file(e.path), "values": r["values"]}
        if "claims" in r:
            rec["claims"] = r["claims"]
        checkpoints.append(rec)
    doc = {
        "schema": SCHEMA,
        "source": str(path),
        "task": task_cfg.to_dict(),
        "settings": {"n": n, "every": every, "pool_seed": POOL_SEED, "claims": claims,
                     "claims_n": claims_n, "routing_pool": ROUTING_POOL},
        "measures": measure_definitions(Task(**task_cfg.to_dict())),
        "checkpoints": checkpoints,
    }
    doc["phases"] = detect_phases(checkpoints)
    doc["claims_first_hold"] = claims_first_hold(checkpoints)
    doc["series_claims"] = {cid: cls().run_series(doc).to_dict() for cid, cls in SERIES_REGISTRY.items()}
    return doc


def claims_first_hold(checkpoints: list[dict]) -> dict:
    """Per claim: the first evaluated step from which it passes at every later evaluated checkpoint, and
    the evaluated step just before it, where it did not (None when it held from the first evaluated
    checkpoint): the claim began to hold somewhere between the two, known no better than the
    ``--claims`` checkpoints place it."""
    evaluated = [c for c in checkpoints if "claims" in c]
    ids = sorted({cid for c in evaluated for cid in c["claims"]})
    out = {}
    for cid in ids:
        verdicts = [(c["step"], c["claims"].get(cid, {}).get("verdict")) for c in evaluated]
        first, before = None, None
        for step, v in reversed(verdicts):
            if v != "pass":
                before = step if first is not None else None
                break
            first = step
        # A mechanism, once formed, should not come and go: every change of verdict is listed, and a
        # pass followed by anything else is a flip back.
        changes = [(a[0], b[0], a[1], b[1]) for a, b in zip(verdicts, verdicts[1:]) if a[1] != b[1]]
        out[cid] = {"first_step_holding": first, "last_step_not_holding": before,
                    "evaluated_steps": [s for s, _ in verdicts], "verdicts": [v for _, v in verdicts],
                    "verdict_changes": len(changes),
                    "flips_back": [{"from_step": a, "to_step": b, "from": va, "to": vb}
                                   for a, b, va, vb in changes if va == "pass"]}
    return out


def first_hold_text(h: dict) -> str:
    """Where a per-checkpoint claim starts to hold (an entry of ``claims_first_hold``), only as precisely
    as it was evaluated."""
    first, before, n = h["first_step_holding"], h.get("last_step_not_holding"), len(h["evaluated_steps"])
    flips = h.get("flips_back") or []
    note = ("; FLIPPED BACK " + ", ".join(f"between steps {f['from_step']} and {f['to_step']} ({f['from']} -> {f['to']})"
                                          for f in flips)) if flips else ""
    if first is None:
        return f"does not hold at the last evaluated checkpoint ({n} evaluated){note}"
    if before is None:
        return f"holds at all {n} evaluated checkpoints (from step {first})"
    return (f"began to hold between steps {before} and {first}: not at {before}, and at every evaluated checkpoint "
            f"from {first} on ({n} evaluated; more with --claims){note}")


def to_json(doc: dict) -> str:
    """Deterministic text: sorted keys, fixed rounding done upstream, a trailing newline."""
    return json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"


def to_csv(doc: dict) -> str:
    """Long form: one row per (step, measure)."""
    lines = ["step,measure,value"]
    for c in doc["checkpoints"]:
        for k in sorted(c["values"]):
            v = c["values"][k]
            lines.append(f"{c['step']},{k},{'' if v is None else repr(float(v))}")
    return "\n".join(lines) + "\n"
