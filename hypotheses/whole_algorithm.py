"""Claim (SPEC §6): the parts are the algorithm. Causal scrubbing of the paper's circuit.

Each activation is resampled from inputs the hypothesis calls equivalent (``measures/scrubbing.py``);
if the hypothesis is the algorithm, the model's accuracy survives on held-out pairs and restricted
slots, where the answers cannot have been memorised. Part by part (``scrubbing.scrub_plans``):
minimality and completeness (as in the IOI paper); a diagnostic item locates the held-out errors on
doubled pairs (``measures/doubled.py``). The items, the parts and the re-registrations (the paper's
correspondence, version 1, is the supporting item ``routing_scrub_recovers[paper]``):
docs/claims/whole_algorithm.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from .base import Arm, Context, Hypothesis, Measurement, REINITIALISED, Threshold, rate, register
from .declaration import WHOLE_MODEL, Item, Kind
from ..data import POS_LHS, POS_RHS, operand_sources
from .measures import doubled as doubled_pairs
from .measures import scrubbing
from .measures.circuits import last_position_correct

POOLS = scrubbing.POOLS
NOTHING_TO_EXPLAIN = 0.1  # model accuracy within this of the floor: recovered is 0, not a ratio of noise
PART_ROWS_PER_POOL = 100  # sequences per pool for the part-by-part items (minimality, completeness)

SOLVES = Threshold(
    0.90,
    ">=",
    "the algorithm is claimed for a model that solves the task: held-out pairs and restricted slots answered within "
    "10 points of perfect (chance 1/59); all pools together, shown, not decided on since 2026-12-07 (each pool "
    "decides on its own: SOLVES_EACH)",
)
SOLVES_EACH = Threshold(
    0.90,
    ">=",
    "SOLVES per pool (re-registered 2026-12-07, bar unchanged): the model answers each pool of held-out pairs and "
    "restricted slots within 10 points of perfect (chance 1/59), so that pools it answers well cannot hide one it "
    "fails (docs/reregistrations/whole_algorithm_solves_per_pool_2026-12-07.md)",
)
RECOVERS = Threshold(
    0.90,
    ">=",
    "the hypothesis must explain >= 90% of the model's accuracy above the floor (registered 2026-12 before the "
    "reference was scrubbed; a wrong correspondence, 'Layer 1 carries only positions' or 'the MLP reads one operand', "
    "has nothing to explain it with and must stay near 0)",
)

KEEPS = Threshold(
    0.90,
    ">=",
    "RECOVERS per pool: on each pool by itself the hypothesis must keep >= 90% of the model's accuracy above chance "
    "(1/59), so that a gain in one pool cannot hide a loss in another; above chance, not above the scrub's floor, "
    "because on a pool that does not use the scrubbed activation the floor sits at the model's accuracy and the ratio "
    "is noise, while chance is every pool's floor under either scrub (re-registered 2026-12-04)",
)
CONSTANTS_ONLY = ("0var_heldout_pair",)  # pools whose operands are all constants: no value token is read
# Each scrub and its control, the wrong correspondence scrubbed the same way.
WRONG_CORRESPONDENCE = {"routing": "position_only", "addition": "first_operand_only"}

SCRUB_SITE = {
    "routing": "$ATTN_OUT_1 at positions 0-14; read at the logits at `=`",
    "addition": "$ATTN_OUT_2 at `=`; read at the logits at `=`",
}
SCRUB_EDIT = {
    "routing": "resampled (causal scrubbing) from positions with the same position and variable before it (value "
    "tokens), or token and variable at t-1 (elsewhere)",
    "addition": "patched from a fresh sequence with the same two operand values in a random form",
}

MINIMAL = Threshold(
    0.50,
    ">=",
    "each part the hypothesis names must be needed: resampling its activation from inputs that differ in what it "
    "carries (the rest scrubbed per the hypothesis) must lose at least half of the scrubbed hypothesis' accuracy "
    "above chance (1/59), on the sequences that use the part; without a variable's identity, the `=` query or an "
    "operand's value the model can at best guess among the 1-6 assignments, so a needed part costs far more, and one "
    "that costs less is at most partly needed (registered 2026-12-01)",
)
COMPLETE = Threshold(
    0.10,
    "<=",
    "IOI completeness (Wang et al. 2022): knocking a subset K of the circuit's parts out of the scrubbed circuit and "
    "out of the whole model must cost the same, max_K |F(C\\K) - F(M\\K)| within 10% of the model's accuracy above "
    "chance, the tolerance RECOVERS grants K = {}; a path outside the circuit that takes over (or is needed) once K "
    "is gone shows as a larger gap (registered 2026-12-01)",
)
ADDER_ERRORS = Threshold(
    0.80,
    ">=",
    "if held-out errors are the addition module's, at least 4 in 5 of the model's errors on held-out variable "
    "sequences (doubled and other pairs, equally many) survive feeding it a perfectly routed input (the constant "
    "twin's Layer-2 output at `=`); an error of the routing is fixed by it, as the routing-broken control must show "
    "(registered 2026-12-01)",
)


@dataclass(frozen=True)
class Part:
    """One part of the hypothesis (activation: ``scrubbing.part_hooks``), what it carries, and whether only
    sequences with a variable operand use it (its minimality item is judged on those alone)."""

    name: str
    statement: str
    variable_only: bool = False


# In the order of ``scrubbing.PARTS``, whose plans resample them.
PARTS = (
    Part(
        "non_value_tokens",
        "Layer 1's output elsewhere in the prefix (variables, PADs, `+`, operand slots) carries the token there and "
        "the variable at t-1, if any",
    ),
    Part(
        "value_token_identity",
        "each value token's Layer-1 output carries its variable (what Layer 2's keys match)",
        variable_only=True,
    ),
    Part(
        "eq_operand_identity",
        "`=`'s Layer-1 output carries the operand variables (what Layer 2's query matches)",
        variable_only=True,
    ),
    Part("lhs_value_read", "Layer 2's `=` reads the first operand's number at its value position"),
    Part("rhs_value_read", "Layer 2's `=` reads the second operand's number at its value position"),
    Part("mlp_adds", "the MLP's output at `=` carries the sum of the two numbers"),
)
if tuple(p.name for p in PARTS) != scrubbing.PARTS:
    raise ValueError(f"whole_algorithm.PARTS {[p.name for p in PARTS]} differ from scrubbing.PARTS {scrubbing.PARTS}")
PART = {p.name: p for p in PARTS}
VARIABLE_PARTS = tuple(p.name for p in PARTS if p.variable_only)  # parts only a sequence with a variable operand uses
# Knocked out together by completeness: the two identities the routing matches, and the two value reads
PAIRS_OF_PARTS = (VARIABLE_PARTS, ("lhs_value_read", "rhs_value_read"))


def _ratio(gain: torch.Tensor, above: torch.Tensor) -> torch.Tensor:
    """gain / above, 0 where ``above`` is within NOTHING_TO_EXPLAIN (nothing to explain)."""
    r = gain / above.clamp(min=1e-12)
    return torch.where(above > NOTHING_TO_EXPLAIN, r, torch.zeros_like(r))


def _mean(x: torch.Tensor) -> float | None:
    """The mean of a bool or float vector, None when it is empty."""
    return float(x.double().mean()) if len(x) else None


def _bootstrap(stat, n: int, *, seed: int, label: str) -> tuple[float, float, float]:
    """``stat(idx)`` on the sample and on 1000 seeded bootstrap resamples (idx: (k, n) row indices):
    (value, low, high), the interval widened to include the value."""
    from ..interventions.mutants import generator

    value = float(stat(torch.arange(n)[None])[0])
    idx = torch.randint(n, (1000, n), generator=generator(seed, label))
    lo, hi = (float(q) for q in torch.quantile(stat(idx), torch.tensor([0.025, 0.975], dtype=torch.float64)))
    return value, min(lo, value), max(hi, value)


def kept(
    model_ok: torch.Tensor,
    scrubbed_ok: torch.Tensor,
    *,
    chance: float,
    seed: int,
    label: str,
    acted: float | None,
    **extra,
) -> Measurement:
    """kept = (acc_scrubbed - chance) / (acc_model - chance) on one pool, with a paired bootstrap interval
    over its sequences; 0 where the model is within NOTHING_TO_EXPLAIN of chance. A gain (kept > 1) is
    reported as measured; the bar is on the loss side only."""
    m, s = model_ok.double(), scrubbed_ok.double()
    if len(m) == 0:
        return Measurement(None, None, None, 0, {"note": "no sequence in this pool", **extra}, acted)

    def stat(idx):
        return _ratio(s[idx].mean(-1) - chance, m[idx].mean(-1) - chance)

    v, lo, hi = _bootstrap(stat, len(m), seed=seed, label=label)
    out = {
        "model_accuracy": float(m.mean()),
        "scrubbed_accuracy": float(s.mean()),
        "loss_under_the_scrub": float(m.mean() - s.mean()),
        **extra,
    }
    if float(m.mean()) - chance <= NOTHING_TO_EXPLAIN:
        out["note"] = "model within 0.1 of chance on this pool: nothing to explain"
    return Measurement(v, lo, hi, len(m), out, acted)


def recovered(
    model_ok: torch.Tensor,
    scrubbed_ok: torch.Tensor,
    floor_ok: torch.Tensor,
    *,
    seed: int,
    acted: float | None,
    label: str,
    groups: dict | None = None,
) -> Measurement:
    """recovered = (acc_scrubbed - acc_floor) / (acc_model - acc_floor), with a seeded bootstrap interval;
    ``groups`` (name -> bool mask: pools, variables, slots, doubled pairs) adds per-group accuracies."""
    m, s, f = (x.double() for x in (model_ok, scrubbed_ok, floor_ok))

    def stat(idx):
        return _ratio(s[idx].mean(-1) - f[idx].mean(-1), m[idx].mean(-1) - f[idx].mean(-1))

    value, lo, hi = _bootstrap(stat, len(m), seed=seed, label=label)
    extra = {"model_accuracy": float(m.mean()), "scrubbed_accuracy": float(s.mean()), "floor_accuracy": float(f.mean())}
    if groups:
        extra["scrubbed_accuracy_by_group"] = {g: float(s[mask].mean()) for g, mask in groups.items()}
        extra["model_accuracy_by_group"] = {g: float(m[mask].mean()) for g, mask in groups.items()}
        extra["group_sizes"] = {g: int(mask.sum()) for g, mask in groups.items()}
    return Measurement(value, lo, hi, len(m), extra, acted)


def share_of(n: int) -> int:
    """Sequences per pool: 200 at the default n, as the effects are large; at least PART_ROWS_PER_POOL (when the
    pools hold that many), so that each pool's own items keep a usable interval at a small n."""
    return min(max(n // (2 * len(POOLS)), PART_ROWS_PER_POOL), n)


def _first_of_each_pool(ctx: Context, k: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The tokens and labels of the first ``k`` sequences of each pool, pool after pool, and {pool: mask}."""

    def compute():
        tokens = torch.cat([ctx.pool(p)[0][:k] for p in POOLS])
        pool_of = torch.arange(len(tokens)) // k
        return tokens, torch.cat([ctx.pool(p)[1][:k] for p in POOLS]), {p: pool_of == i for i, p in enumerate(POOLS)}

    return ctx.memo(("whole_algorithm", "first of each pool", k), compute)


def _pooled(ctx: Context) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """What the scrubs run on: the first ``share_of(n)`` sequences of each pool."""
    return _first_of_each_pool(ctx, share_of(ctx.n))


def _subset(ctx: Context) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """What the part-by-part items run on: the first PART_ROWS_PER_POOL sequences of each pool (fewer when
    the pools are smaller) whatever n, so that their 18 forwards keep a narrow interval at a small n."""
    return _first_of_each_pool(ctx, min(PART_ROWS_PER_POOL, ctx.n))


def _groups(ctx: Context) -> dict[str, torch.Tensor]:
    """name -> mask of the pooled sequences: each pool, and where the hypothesis fails: by operand variable
    (in either slot), by slot holding a variable, and doubled pairs (n, n)."""

    def compute():
        tokens, _, pools = _pooled(ctx)
        groups = dict(pools)
        first_var, names = ctx.task.vocab.first_var, ctx.task.vocab.var_names
        lhs, rhs = tokens[:, POS_LHS], tokens[:, POS_RHS]
        for i, name in enumerate(names):
            groups[f"variable {name}"] = (lhs == first_var + i) | (rhs == first_var + i)
        groups["variable in LHS slot"] = lhs >= first_var
        groups["variable in RHS slot"] = rhs >= first_var
        src = operand_sources(tokens, ctx.task.vocab)
        rows = torch.arange(len(tokens))
        groups["doubled pair (n, n)"] = tokens[rows, src[:, 0]] == tokens[rows, src[:, 1]]
        return {g: mask for g, mask in groups.items() if mask.any()}

    return ctx.memo(("whole_algorithm", "groups"), compute)


def _model_ok(ctx: Context, model, rows=_pooled) -> torch.Tensor:
    """Whether ``model`` answers each of the sequences ``rows`` (``_pooled`` or ``_subset``) gives, once."""
    tokens, labels, _ = rows(ctx)
    key = ("whole_algorithm", "clean", rows.__name__, id(model))
    return ctx.memo(key, lambda: last_position_correct(model, tokens, labels))


def _nothing_to_explain(ctx: Context, model) -> Measurement | None:
    """A model at chance: the floor is chance too, so there is no accuracy to recover."""
    acc = float(_model_ok(ctx, model).double().mean())
    if acc < NOTHING_TO_EXPLAIN + 1 / model.cfg.d_vocab_out:
        return Measurement.exact(
            0.0, n=len(_pooled(ctx)[0]), model_accuracy=acc, note="model at chance: nothing to explain"
        )
    return None


def _scrub_runs(ctx: Context, which: str, arm: Arm, claimed: str = "hypothesis") -> tuple[str, dict, dict]:
    """The ``which`` ("routing" or "addition") scrub with the arm's features and its floor, once per model
    and features."""
    features = arm.variant if arm.variant == WRONG_CORRESPONDENCE[which] else claimed
    tokens, labels, _ = _pooled(ctx)

    def scrub(features: str) -> dict:
        kw = {"seed": ctx.seed, "features": features, "components": ctx.components}
        if which == "routing":
            return scrubbing.routing_scrub(arm.model, tokens, labels, **kw)
        return scrubbing.addition_scrub(arm.model, tokens, labels, ctx.task, **kw)

    s = ctx.memo(("whole_algorithm", which, id(arm.model), features), lambda: scrub(features))
    f = ctx.memo(("whole_algorithm", f"{which}_floor", id(arm.model)), lambda: scrub("none"))
    return features, s, f


def recovers(ctx: Context, arm: Arm, *, which: str, claimed: str = "hypothesis") -> Measurement:
    """The ``which`` scrub's recovered fraction over every pool, with the accuracies by group."""
    if (skip := _nothing_to_explain(ctx, arm.model)) is not None:
        return skip
    features, s, f = _scrub_runs(ctx, which, arm, claimed)
    return recovered(
        _model_ok(ctx, arm.model),
        s["correct"],
        f["correct"],
        seed=ctx.seed,
        acted=s["acted"] if arm.variant != "claimed" else None,
        label=f"{which}.{features}",
        groups=_groups(ctx),
    )


def keeps_in_pool(ctx: Context, arm: Arm, *, which: str, pool: str) -> Measurement:
    """The ``which`` scrub on one pool's sequences alone: ``kept`` with its paired bootstrap interval; the
    control's ``acted`` is its change on this pool's rows."""
    features, s, f = _scrub_runs(ctx, which, arm)
    mask = _groups(ctx)[pool]
    return kept(
        _model_ok(ctx, arm.model)[mask],
        s["correct"][mask],
        chance=1 / arm.model.cfg.d_vocab_out,
        seed=ctx.seed,
        label=f"{which}_runs.{features}.{pool}",
        acted=float(s["change"][mask].mean()) if arm.variant != "claimed" else None,
        floor_accuracy=float(f["correct"][mask].double().mean()),
    )


def _rows_of_part(ctx: Context) -> dict[str, torch.Tensor]:
    """{part: mask of the subset's sequences that use it}: a variable operand's parts, those with one."""

    def compute():
        t_sub, first_var = _subset(ctx)[0], ctx.task.vocab.first_var
        uses_variable = (t_sub[:, POS_LHS] >= first_var) | (t_sub[:, POS_RHS] >= first_var)
        return {p.name: uses_variable if p.variable_only else torch.ones(len(t_sub), dtype=torch.bool) for p in PARTS}

    return ctx.memo(("whole_algorithm", "rows_of_part"), compute)


def _parts(ctx: Context, model) -> dict:
    """Every run the part-by-part items share, once per model: the full hypothesis scrub C, its redraw C',
    C without each part, and the model M without each part / pair of parts."""

    def compute():
        tokens, labels, _ = _subset(ctx)
        plans = scrubbing.scrub_plans(model, tokens, labels, seed=ctx.seed, components=ctx.components)
        hyp, removed, targets = plans["hypothesis"], plans["removed"], plans["targets"]
        part_hook = scrubbing.part_hooks(ctx.components)
        measure = {p: (part_hook[p], targets[p]) for p in scrubbing.PARTS}
        out = {
            "plans": plans,
            "C": scrubbing.run_plan(model, tokens, labels, hyp, measure),
            "C'": scrubbing.run_plan(model, tokens, labels, plans["redrawn"], measure),
        }
        for p in scrubbing.PARTS:
            out[("C", p)] = scrubbing.run_plan(
                model, tokens, labels, scrubbing.combine(hyp, removed[p]), {p: measure[p]}
            )
        for p in scrubbing.PARTS[1:]:
            out[("M", p)] = scrubbing.run_plan(model, tokens, labels, removed[p], {p: measure[p]})
        for pair in PAIRS_OF_PARTS:
            both = scrubbing.combine(*(removed[p] for p in pair))
            out[("C", pair)] = scrubbing.run_plan(model, tokens, labels, scrubbing.combine(hyp, both))
            out[("M", pair)] = scrubbing.run_plan(model, tokens, labels, both)
        return out

    return ctx.memo(("whole_algorithm", "parts", id(model)), compute)


def minimality(ctx: Context, arm: Arm, *, part: str) -> Measurement:
    """cost = (acc_C - acc_{C without the part}) / (acc_C - chance) on the sequences that use ``part``, with a
    paired bootstrap interval; 0 where the scrubbed hypothesis itself is within NOTHING_TO_EXPLAIN of chance.
    The ``redrawn`` control removes nothing and redraws the hypothesis' donors."""
    if (skip := _nothing_to_explain(ctx, arm.model)) is not None:
        return skip
    r = _parts(ctx, arm.model)
    used = _rows_of_part(ctx)[part]
    other = r["C'"] if arm.variant == "redrawn" else r[("C", part)]
    # The redraw acts as a whole (every cell it resamples, at every hook): at a part's own cells it may
    # change nothing, in a model whose activation there is exactly a function of what the part carries (a
    # planted solver), which is the hypothesis holding, not an idle edit.
    acted = r["C'"]["acted"][scrubbing.ALL_CELLS] if arm.variant == "redrawn" else None
    s, o = r["C"]["correct"][used].double(), other["correct"][used].double()
    chance = 1 / ctx.model.cfg.d_vocab_out
    if len(s) == 0:
        m = Measurement(None, None, None, 0, {"note": "no sequence uses this part"}, acted)
    else:
        v, lo, hi = _bootstrap(
            lambda idx: _ratio(s[idx].mean(-1) - o[idx].mean(-1), s[idx].mean(-1) - chance),
            len(s),
            seed=ctx.seed,
            label=f"minimality.{part}.{arm.variant}",
        )
        extra = {"scrubbed_accuracy": float(s.mean()), "part_removed_accuracy": float(o.mean())}
        m = Measurement(v, lo, hi, len(s), extra, acted)
    m.extra.update(
        {
            "part": PART[part].statement,
            "model_accuracy": float(_model_ok(ctx, arm.model, _subset)[used].double().mean()),
            "sequences": "with a variable operand" if PART[part].variable_only else "all",
            "accuracy_elsewhere_scrubbed": _mean(r["C"]["correct"][~used]),
            "accuracy_elsewhere_part_removed": _mean(other["correct"][~used]),
            "cells_given_a_differing_donor": r["plans"]["removed_share"][part],
            "change_of_the_activation": other["acted"][part],
        }
    )
    if arm.variant == "claimed":
        pool_sub = _subset(ctx)[2]
        for key, run in (("scrubbed_accuracy_by_pool", r["C"]), ("part_removed_accuracy_by_pool", other)):
            m.extra[key] = {
                p: float(run["correct"][mask & used].double().mean())
                for p, mask in pool_sub.items()
                if (mask & used).any()
            }
    return m


def completeness(ctx: Context, arm: Arm) -> Measurement:
    """max over K of |F(C\\K) - F(M\\K)| / (F(M) - chance), bootstrap over sequences. The
    ``circuit_without_identity`` control takes C without the value tokens' identity as its circuit."""
    chance = 1 / ctx.model.cfg.d_vocab_out
    n = len(_subset(ctx)[0])
    acc = float(_model_ok(ctx, arm.model, _subset).double().mean())
    if acc < NOTHING_TO_EXPLAIN + chance:
        return Measurement.exact(
            1.0, n=n, model_accuracy=acc, note="model at chance: nothing to explain, so completeness cannot be shown"
        )
    r = _parts(ctx, arm.model)
    clean = {"correct": _model_ok(ctx, arm.model, _subset)}
    m_ok = clean["correct"].double()
    acted = None
    if arm.variant == "circuit_without_identity":
        p1, p2 = pair = PAIRS_OF_PARTS[0]
        subsets = {
            "{}": (r[("C", p1)], clean),
            p1: (r[("C", p1)], r[("M", p1)]),
            p2: (r[("C", pair)], r[("M", p2)]),
            f"{p1} + {p2}": (r[("C", pair)], r[("M", pair)]),
        }
        acted = r[("C", p1)]["acted"][p1]
    else:
        subsets = {"{}": (r["C"], clean)}
        subsets.update({p: (r[("C", p)], r[("M", p)]) for p in scrubbing.PARTS[1:]})
        subsets.update({" + ".join(pair): (r[("C", pair)], r[("M", pair)]) for pair in PAIRS_OF_PARTS})
    names = list(subsets)
    c_ok = torch.stack([subsets[k][0]["correct"] for k in names]).double()  # (K, n)
    mk_ok = torch.stack([subsets[k][1]["correct"] for k in names]).double()

    def gaps(idx):  # (k, n) -> (k, K)
        above = (m_ok[idx].mean(-1) - chance).clamp(min=1e-12)
        return (c_ok[:, idx].mean(-1) - mk_ok[:, idx].mean(-1)).abs().transpose(0, 1) / above[:, None]

    v, lo, hi = _bootstrap(lambda idx: gaps(idx).max(-1).values, n, seed=ctx.seed, label=f"completeness.{arm.variant}")
    g = gaps(torch.arange(n)[None])[0]
    by_subset = {
        k: {"F(C\\K)": float(c_ok[i].mean()), "F(M\\K)": float(mk_ok[i].mean()), "gap": float(g[i])}
        for i, k in enumerate(names)
    }
    extra = {"largest_gap_subset": names[int(g.argmax())], "by_subset": by_subset, "model_accuracy": acc}
    return Measurement(v, lo, hi, n, extra, acted)


def doubled_pair_errors(ctx: Context, arm: Arm) -> Measurement:
    """Share of the model's held-out errors (doubled and other pairs) that a perfectly routed input to the
    addition module does not fix; the control breaks the routing instead."""
    if (skip := _nothing_to_explain(ctx, arm.model)) is not None:
        return skip
    sets = ctx.memo(("whole_algorithm", "doubled_sets"), lambda: doubled_pairs.doubled_sets(ctx.task, ctx.seed))
    if sets is None:
        return Measurement(None, None, None, 0, {"note": "the task holds out no doubled pair (n, n)"})
    broken = None
    if arm.variant == "routing_broken":
        broken = scrubbing.identity_removed(arm.model, sets["tokens"], seed=ctx.seed, label="doubled.routing_broken")
    r = doubled_pairs.ideal_input_runs(arm.model, sets, broken, components=ctx.components)
    wrong = ~r["model_ok"]
    m = rate(~r["ideal_ok"][wrong], acted=r["acted"].get("routing_broken") if broken is not None else None)
    m.extra.update(
        {
            "doubled_pairs": doubled_pairs.summary(r, sets["doubled"]),
            "other_heldout_pairs": doubled_pairs.summary(r, ~sets["doubled"]),
            "errors_that_are_on_doubled_pairs": _mean(sets["doubled"][wrong]),
            "ideal_input_change": r["acted"]["ideal_input"],
        }
    )
    if arm.variant == "claimed":
        m.extra["by_doubled_pair [model, ideal input, weights-only adder]"] = doubled_pairs.per_doubled_pair(r, sets)
        m.extra["paper_heldout_constants"] = ctx.memo(
            ("whole_algorithm", "heldout_constants", id(arm.model)),
            lambda: doubled_pairs.heldout_constants_with_and_without_doubled(arm.model, ctx.task, ctx.seed),
        )
    return m


def solves(ctx: Context, arm: Arm, *, pool: str | None = None) -> Measurement:
    ok = _model_ok(ctx, arm.model)
    return rate(ok if pool is None else ok[_groups(ctx)[pool]])


# `$share` and the hooks in the items' texts are filled per model and n.
PARTS_SITE = (
    "the hypothesis' parts: $ATTN_OUT_1 at 0-15, $VALUES_2 at the operands' values, $MLP_OUT_2 at `=`; "
    "read at the logits at `=`"
)


def _keeps_item(which: str, pool: str) -> Item:
    wrong = WRONG_CORRESPONDENCE[which]
    # a constant-only pool reads no value token, so 'value tokens carry only positions' predicts nothing
    # wrong there: that control is judged on the pools with a variable operand
    shown = wrong != "position_only" or pool not in CONSTANTS_ONLY
    return Item(
        f"{which}_scrub_keeps[{pool}]",
        site=SCRUB_SITE[which],
        intervention=SCRUB_EDIT[which],
        definition=f"kept = (acc_scrubbed - 1/59) / (acc_model - 1/59) on the $share {pool} sequences alone, "
        f"the scrub as in {which}_scrub_recovers",
        kind=Kind.CAUSAL,
        threshold=KEEPS,
        measure=partial(keeps_in_pool, which=which, pool=pool),
        controls=("reinitialised", wrong) if shown else ("reinitialised",),
    )


def _minimality_item(part: Part) -> Item:
    return Item(
        f"minimality[{part.name}]",
        site=PARTS_SITE,
        intervention=f"{part.name} resampled from cells that differ in what it carries, the rest scrubbed per the "
        "hypothesis",
        definition="cost = (acc_C - acc_C\\p) / (acc_C - 1/59): C = every part resampled from a cell that agrees "
        "on what it carries (Layer 1 at 0-14 as the routing scrub, at `=` by operand variables; Layer 2's "
        f"values at the operands by number, elsewhere by position); C\\p = the same with {part.name} "
        f"({part.statement}) resampled from cells that differ in it",
        kind=Kind.CAUSAL,
        threshold=MINIMAL,
        measure=partial(minimality, part=part.name),
        controls=("reinitialised", "redrawn"),
        required=part.name != "non_value_tokens",
    )


@register
class WholeAlgorithm(Hypothesis):
    id = "whole_algorithm"
    spec = "§6"
    statement = (
        "The paper's circuit, with Layer 1 copying t-1's variable into every position, is the algorithm: resampling "
        "every activation it calls irrelevant, from inputs it calls equivalent, keeps the model's accuracy on "
        "held-out pairs and restricted slots, on each pool of them."
    )
    controls = {
        "reinitialised": REINITIALISED,
        "position_only": "wrong correspondence 'Layer 1 writes only positions': value tokens' Layer-1 output "
        "resampled from the same position of any sequence, whatever its variable",
        "first_operand_only": "wrong correspondence 'the MLP reads only one operand': Layer 2's output at `=` taken "
        "from a sequence sharing only the first operand's value",
        "circuit_without_identity": "a circuit with a needed part missing: the scrub with the value tokens' identity "
        "resampled from other variables taken as the circuit, so knocking parts out of it "
        "and out of the model must cost differently (a completeness gap above the bar)",
        "routing_broken": "the value tokens' identity resampled from other variables first, so the model errs in its "
        "routing: a perfectly routed input then fixes those errors, and few survive it",
        "redrawn": "the hypothesis' scrub with its donors drawn again, no part removed: an edit that changes every "
        "resampled cell and no part's correspondence, so it must cost less than a needed part",
    }
    owns = WHOLE_MODEL
    figures = ()
    cost = 2.8
    items = (
        Item(
            "model_solves_the_task",
            site="the logits at `=`",
            definition=f"accuracy over {', '.join(POOLS)} ($share each)",
            kind=Kind.OBSERVATIONAL,
            threshold=SOLVES,
            measure=solves,
            controls=("reinitialised",),
            required=False,
        ),
        *(
            Item(
                f"model_solves_the_task[{pool}]",
                site="the logits at `=`",
                definition=f"accuracy on the $share {pool} sequences alone",
                kind=Kind.OBSERVATIONAL,
                threshold=SOLVES_EACH,
                measure=partial(solves, pool=pool),
                controls=("reinitialised",),
            )
            for pool in POOLS
        ),
        Item(
            "routing_scrub_recovers",
            site=SCRUB_SITE["routing"],
            intervention=SCRUB_EDIT["routing"],
            definition="recovered accuracy with attn_out_1 at positions 0-14 resampled from positions with the same "
            "position and (value token) variable before it / (elsewhere) token and variable at t-1 if any",
            kind=Kind.CAUSAL,
            threshold=RECOVERS,
            measure=partial(recovers, which="routing"),
            controls=("reinitialised", "position_only"),
        ),
        Item(
            "routing_scrub_recovers[paper]",
            site=SCRUB_SITE["routing"],
            intervention="resampled (causal scrubbing) from positions with the same position and, at value tokens, "
            "variable before it; elsewhere the same position and token",
            definition="as routing_scrub_recovers, with the paper's correspondence (version 1): every non-value "
            "position keyed by (position, token) alone, i.e. Layer 1 writes identities onto value tokens only (shown, "
            "not decided on)",
            kind=Kind.CAUSAL,
            threshold=RECOVERS,
            measure=partial(recovers, which="routing", claimed="paper"),
            controls=("reinitialised", "position_only"),
            required=False,
        ),
        Item(
            "addition_scrub_recovers",
            site=SCRUB_SITE["addition"],
            intervention=SCRUB_EDIT["addition"],
            definition="recovered accuracy with attn_out_2[15] patched from a fresh sequence with the same two operand "
            "values in a random form (constants or variables, any prefix)",
            kind=Kind.CAUSAL,
            threshold=RECOVERS,
            measure=partial(recovers, which="addition"),
            controls=("reinitialised", "first_operand_only"),
        ),
        *(_keeps_item(which, p) for which in WRONG_CORRESPONDENCE for p in POOLS),
        *(_minimality_item(p) for p in PARTS),
        Item(
            "completeness",
            site=PARTS_SITE,
            intervention="each subset K of parts resampled from cells that differ in what they carry, in the scrubbed "
            "circuit and in the clean model",
            definition="max over K in {{}, each part but non_value_tokens, value_token_identity + eq_operand_identity, "
            "lhs_value_read + rhs_value_read} of |F(C\\K) - F(M\\K)| / (F(M) - 1/59): K's cells resampled "
            "from cells that differ in what they carry, in the scrubbed circuit C and in the clean model M",
            kind=Kind.CAUSAL,
            threshold=COMPLETE,
            measure=completeness,
            controls=("circuit_without_identity",),
        ),
        Item(
            "doubled_pair_errors_are_the_adders",
            site="$ATTN_OUT_2 at `=`; read at the logits at `=`",
            intervention="patched from the constant twin (the same operands as constants)",
            definition="P(still wrong with attn_out_2[15] <- the constant twin's | model wrong), over variable "
            f"sequences of every held-out doubled pair ({doubled_pairs.PER_PAIR_AND_FORM} per pair and form) and as "
            "many of other held-out pairs",
            kind=Kind.CAUSAL,
            threshold=ADDER_ERRORS,
            measure=doubled_pair_errors,
            controls=("reinitialised", "routing_broken"),
            required=False,
        ),
    )

    @classmethod
    def text_fields(cls, n: int) -> dict:
        return {"share": share_of(n)}
