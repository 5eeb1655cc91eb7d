"""The task of SPEC §1: text form, split, training table, training batches, pools, exhaustive sets.

Sequences are checked by decoding them here, one token at a time, independently of how
``data/sequences.py`` builds them: every operand is resolved to its value through the prefix, so a
held-out pair hidden behind variables is still caught.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

import numpy as np
import pytest
import torch

from assignadd import Task, parse, render
from assignadd.data import POOL_NAMES, VOCAB, ParseError, TaskError, operand_sources, value_positions

N = 59
PLUS, EQ, PAD, FIRST_VAR = 59, 60, 61, 62
VARS = "abcdefghijkl"
NEVER_RHS, NEVER_LHS = {"a", "b"}, {"k", "l"}
SPEC_EXAMPLE = "PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 ="

N_BATCHES, BATCH = 50, 512  # 25,600 training sequences for the invariants


def split_from_spec(f: float = 0.7, seed: int = 42) -> tuple[set, set]:
    """SPEC §1.3, recomputed: ``random.Random(seed).sample`` over the row-major list of pairs."""
    all_pairs = [(a, b) for a in range(N) for b in range(N)]
    train = set(random.Random(seed).sample(all_pairs, math.floor(f * len(all_pairs))))
    return train, set(all_pairs) - train


def chi_square(counts, expected) -> float:
    counts, expected = np.asarray(counts, float), np.asarray(expected, float)
    return float(((counts - expected) ** 2 / expected).sum())


# Chi-square critical values at p = 1e-4 (df -> value): a fair generator fails about once in 10,000 runs.
CHI2_CRIT = {1: 15.14, 2: 18.42, 3: 21.11, 4: 23.51, 5: 25.74, 6: 27.86, 9: 33.72, 11: 37.33, 58: 110.0}


def decode(seq) -> dict:
    """One sequence, read token by token: assignments, PAD gaps, operands and their resolved values.

    Fails (AssertionError) on anything outside the frame of SPEC §1.2.
    """
    seq = [int(t) for t in seq]
    assert len(seq) == 16, seq
    assert seq[12] == PLUS and seq[15] == EQ, seq
    assignments, gaps, i, gap = [], [], 0, 0
    while i < 12:
        if seq[i] == PAD:
            gap += 1
            i += 1
        else:
            assert FIRST_VAR <= seq[i] < FIRST_VAR + 12, f"prefix token {seq[i]} at {i}: {seq}"
            assert i + 1 < 12 and 0 <= seq[i + 1] < N, f"variable at {i} without a value: {seq}"
            assignments.append((VARS[seq[i] - FIRST_VAR], seq[i + 1], i))
            gaps.append(gap)
            gap = 0
            i += 2
    gaps.append(gap)
    values = {v: val for v, val, _ in assignments}
    assert len(values) == len(assignments), f"a variable is assigned twice: {seq}"

    def operand(tok):
        if 0 <= tok < N:
            return None, tok
        assert FIRST_VAR <= tok < FIRST_VAR + 12, f"operand {tok}: {seq}"
        var = VARS[tok - FIRST_VAR]
        assert var in values, f"core variable {var} is not assigned: {seq}"
        return var, values[var]

    lhs_var, num1 = operand(seq[13])
    rhs_var, num2 = operand(seq[14])
    return {
        "assignments": assignments,
        "gaps": gaps,
        "n": len(assignments),
        "lhs_var": lhs_var,
        "rhs_var": rhs_var,
        "num1": num1,
        "num2": num2,
        "n_vars": (lhs_var is not None) + (rhs_var is not None),
    }


def decode_all(tokens, labels) -> list[dict]:
    out = []
    for seq, label in zip(tokens.tolist(), labels.tolist()):
        d = decode(seq)
        assert label == (d["num1"] + d["num2"]) % N, f"label {label} for {render(torch.tensor(seq))}"
        out.append(d)
    return out


@pytest.fixture(scope="module")
def training_sequences(paper_task):
    """Decoded sequences of many training batches (the invariants need many draws)."""
    seqs = []
    for step in range(N_BATCHES):
        tokens, labels = paper_task.training_batch(run_seed=1, step=step, batch_size=BATCH)
        assert tokens.shape == (BATCH, 16) and tokens.dtype == torch.long
        assert labels.shape == (BATCH,) and labels.dtype == torch.long
        seqs.extend(decode_all(tokens, labels))
    return seqs


# ----- text form (SPEC §1.1) -------------------------------------------------------------------------
def test_parse_render_round_trip_on_spec_example():
    tokens = parse(SPEC_EXAMPLE)
    a, j, k = FIRST_VAR + 0, FIRST_VAR + 9, FIRST_VAR + 10
    assert tokens.tolist() == [PAD, PAD, a, 40, PAD, j, 18, PAD, PAD, PAD, k, 9, PLUS, a, 27, EQ]
    assert tokens.dtype == torch.long
    assert render(tokens) == SPEC_EXAMPLE
    assert render(tokens.tolist()) == SPEC_EXAMPLE
    assert VOCAB.size == 74 and VOCAB.plus == PLUS and VOCAB.eq == EQ and VOCAB.pad == PAD


def test_parse_tolerates_extra_whitespace_but_render_is_canonical():
    assert render(parse("  " + SPEC_EXAMPLE.replace(" ", "   ") + "\n")) == SPEC_EXAMPLE


@pytest.mark.parametrize("bad_word", ["x", "59", "07", "-1", "A", "pad", "m", "1.5"])
def test_parse_rejects_a_bad_word_and_names_it(bad_word):
    text = SPEC_EXAMPLE.replace("40", bad_word, 1)
    with pytest.raises(ParseError, match=re.escape(repr(bad_word))):
        parse(text)


@pytest.mark.parametrize(
    "n_tokens, message",
    [
        (0, "got no tokens"),
        (15, "expected the core '\\+ LHS RHS =' at the end, got '9 \\+ a 27'"),  # short, and its '=' is missing
        (17, "expected 16 tokens.*got 17"),
    ],
)
def test_parse_rejects_wrong_length_and_says_what_is_wrong(n_tokens, message):
    words = (SPEC_EXAMPLE.split() * 2)[:n_tokens]
    with pytest.raises(ParseError, match=message):
        parse(" ".join(words))


@pytest.mark.parametrize(
    "text, named",
    [
        ("PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 = a 27 +", "= a 27 +"),  # core frame swapped
        ("PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 PAD", "+ a 27 PAD"),
        ("PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + PAD 27 =", "'PAD'"),  # operand must be number or variable
        ("PAD PAD a 40 PAD j 18 PAD PAD PAD k 9 + a = =", "'='"),
        ("PAD PAD 5 40 PAD j 18 PAD PAD PAD k 9 + a 27 =", "'5' at position 2"),  # number without variable
        ("PAD PAD a b PAD j 18 PAD PAD PAD k 9 + a 27 =", "'a' at position 2"),  # variable without value
        ("PAD PAD a 40 PAD j 18 PAD PAD PAD PAD k + a 27 =", "'k' at position 11"),  # value falls off prefix
        ("+ PAD a 40 PAD j 18 PAD PAD PAD k 9 + a 27 =", "'+' at position 0"),
    ],
)
def test_parse_rejects_a_bad_frame_and_names_the_offending_token(text, named):
    with pytest.raises(ParseError, match=re.escape(named)):
        parse(text)


def test_parse_rejects_non_strings_and_render_rejects_unknown_ids():
    with pytest.raises(ParseError, match="expected a string"):
        parse(parse(SPEC_EXAMPLE))
    with pytest.raises(ParseError, match="token id 74"):
        render([74] * 16)
    with pytest.raises(ParseError, match="one sequence .T. or a batch .B, T."):
        render(parse(SPEC_EXAMPLE)[None, None])


# ----- split and training table (SPEC §1.3) ----------------------------------------------------------
def test_split_is_bit_exact_with_spec_rule(paper_task):
    train, heldout = split_from_spec(0.7, 42)
    assert len(train) == 2436 and len(heldout) == 1045
    assert paper_task.training_pairs == train
    assert paper_task.heldout_pairs == heldout


def test_split_follows_f_and_seed():
    for f, seed in ((0.3, 42), (0.7, 7)):
        train, heldout = split_from_spec(f, seed)
        task = Task(f=f, seed=seed)
        assert task.training_pairs == train and task.heldout_pairs == heldout
    assert Task(seed=7).training_pairs != Task(seed=42).training_pairs


def test_training_table_has_102312_rows_at_f07_r1(paper_task):
    assert paper_task.n_training_rows == 2436 * (12 + 10 + 10 + 10) == 102_312


def test_training_table_keeps_2var_rows_with_probability_r():
    base = 2436 * 32  # 0-var and 1-var rows do not depend on r
    assert Task(r=0.0).n_training_rows == base
    rows = Task(r=0.5).n_training_rows - base
    expected, sd = 24_360 * 0.5, math.sqrt(24_360 * 0.25)
    assert abs(rows - expected) < 5 * sd, rows
    assert Task(r=0.9).n_training_rows < 102_312


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"f": 0.0}, "f must be in"),
        ({"f": 1.5}, "f must be in"),
        ({"f": float("nan")}, "f must be in"),
        ({"r": -0.1}, "r must be in"),
        ({"never_rhs": ("z",)}, "restricted variable 'z'"),
    ],
)
def test_task_rejects_bad_parameters(kwargs, message):
    with pytest.raises(TaskError, match=message):
        Task(**kwargs)


def test_numbers_missing_from_training_on_a_tiny_split():
    assert Task().numbers_missing_from_training() == []
    train, _ = split_from_spec(0.01, 42)
    seen = {x for pair in train for x in pair}
    assert Task(f=0.01).numbers_missing_from_training() == [n for n in range(N) if n not in seen] != []


def test_valid_and_restricted_variable_pairs_are_counted_as_spec(paper_task):
    as_names = lambda arr: {(VARS[i], VARS[j]) for i, j in arr.tolist()}  # noqa: E731
    valid = {(x, y) for x in VARS for y in VARS if x != y and x not in NEVER_LHS and y not in NEVER_RHS}
    assert len(valid) == 92 and as_names(paper_task.valid_var_pairs) == valid
    r1 = {(x, y) for x in VARS for y in VARS if x != y and ((x in NEVER_LHS) != (y in NEVER_RHS))}
    r2 = {(x, y) for x in NEVER_LHS for y in NEVER_RHS}
    assert len(r1) == 36 and as_names(paper_task.restricted_1_var_pairs) == r1
    assert len(r2) == 4 and as_names(paper_task.restricted_2_var_pairs) == r2


# ----- training batches (SPEC §1.2, §1.3) ------------------------------------------------------------
def test_training_batches_are_well_formed_with_right_labels(training_sequences):
    # decode() checked: 16 tokens, core frame, prefix of PADs and `var value`, distinct variables,
    # every core variable assigned; decode_all() checked label = (num1 + num2) mod 59.
    assert len(training_sequences) == N_BATCHES * BATCH


def test_heldout_pair_never_appears_in_training_batches(training_sequences):
    _, heldout = split_from_spec()
    pairs = {(d["num1"], d["num2"]) for d in training_sequences}
    assert not pairs & heldout
    assert len(pairs) > 2300  # nearly every training pair shows up in 25,600 draws


def test_restricted_variable_never_in_its_forbidden_slot_in_training_batches(training_sequences):
    assert not {d["lhs_var"] for d in training_sequences} & NEVER_LHS
    assert not {d["rhs_var"] for d in training_sequences} & NEVER_RHS
    # ... while they still appear in prefixes, and in their allowed slots.
    prefix_vars = {v for d in training_sequences for v, _, _ in d["assignments"]}
    assert prefix_vars == set(VARS)
    assert {d["lhs_var"] for d in training_sequences} == set(VARS) - NEVER_LHS | {None}
    assert {d["rhs_var"] for d in training_sequences} == set(VARS) - NEVER_RHS | {None}


def test_training_batches_mix_kinds_in_table_proportions(training_sequences):
    kinds = Counter((d["lhs_var"] is not None, d["rhs_var"] is not None) for d in training_sequences)
    counts = [kinds[(False, False)], kinds[(True, False)], kinds[(False, True)], kinds[(True, True)]]
    total = len(training_sequences)
    assert chi_square(counts, [total * p / 42 for p in (12, 10, 10, 10)]) < CHI2_CRIT[3], counts


def test_2var_training_pairs_cover_exactly_the_92_valid_variable_pairs(training_sequences):
    pairs = Counter((d["lhs_var"], d["rhs_var"]) for d in training_sequences if d["n_vars"] == 2)
    valid = {(x, y) for x in VARS for y in VARS if x != y and x not in NEVER_LHS and y not in NEVER_RHS}
    assert set(pairs) == valid
    total = sum(pairs.values())
    # (v1, v2) uniform over the 92 valid pairs: no pair far from total / 92.
    assert max(pairs.values()) < 1.6 * total / 92 and min(pairs.values()) > 0.5 * total / 92


def test_number_of_assignments_is_uniform_and_at_least_two_for_2var(training_sequences):
    for two_var, probs in ((False, [1 / 6] * 6), (True, [0, 2 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 6])):
        ns = Counter(d["n"] for d in training_sequences if (d["n_vars"] == 2) == two_var)
        total = sum(ns.values())
        assert set(ns) <= set(range(1, 7))
        if two_var:
            assert ns[1] == 0
            counts, expected = [ns[n] for n in range(2, 7)], [total * p for p in probs[1:]]
        else:
            counts, expected = [ns[n] for n in range(1, 7)], [total * p for p in probs]
        assert chi_square(counts, expected) < CHI2_CRIT[len(counts) - 1], (two_var, counts)


def test_pad_count_is_12_minus_2n_and_pads_fall_uniformly_into_the_gaps(training_sequences):
    gap_totals: dict[int, np.ndarray] = {}
    for d in training_sequences:
        assert sum(d["gaps"]) == 12 - 2 * d["n"]
        gap_totals.setdefault(d["n"], np.zeros(d["n"] + 1))
        gap_totals[d["n"]] += d["gaps"]
    assert not gap_totals[6].any()  # 6 assignments fill the prefix
    for n in range(1, 6):
        # Each PAD picks one of the n + 1 gaps independently: per-gap totals are multinomial.
        counts = gap_totals[n]
        assert chi_square(counts, [counts.sum() / (n + 1)] * (n + 1)) < CHI2_CRIT[n], (n, counts)


def test_assignments_are_shuffled_and_distractors_are_uniform(training_sequences):
    # Where the LHS variable's assignment sits among the n assignments: uniform on 0..n-1.
    for n in (3, 6):
        where = Counter(
            [v for v, _, _ in d["assignments"]].index(d["lhs_var"])
            for d in training_sequences
            if d["n"] == n and d["n_vars"] == 1 and d["lhs_var"] is not None
        )
        counts = [where[i] for i in range(n)]
        assert chi_square(counts, [sum(counts) / n] * n) < CHI2_CRIT[n - 1], (n, counts)
    # Distractors: variables not in the core, values uniform on 0..58, every variable used.
    values, names = Counter(), Counter()
    for d in training_sequences:
        if d["n_vars"] == 0:
            continue  # a 0-var prefix has no operand variable to tell apart from distractors
        for v, val, _ in d["assignments"]:
            if v not in (d["lhs_var"], d["rhs_var"]):
                values[val] += 1
                names[v] += 1
    assert chi_square([values[i] for i in range(N)], [sum(values.values()) / N] * N) < CHI2_CRIT[58]
    assert set(names) == set(VARS)


def test_training_batches_are_seeded(paper_task):
    a = paper_task.sample_batch(256, np.random.default_rng(3))
    b = paper_task.sample_batch(256, np.random.default_rng(3))
    c = paper_task.sample_batch(256, np.random.default_rng(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    s0 = paper_task.training_batch(run_seed=5, step=10, batch_size=64)
    assert torch.equal(s0[0], paper_task.training_batch(run_seed=5, step=10, batch_size=64)[0])
    assert torch.equal(s0[0], Task().training_batch(run_seed=5, step=10, batch_size=64)[0])  # a fresh Task too
    assert not torch.equal(s0[0], paper_task.training_batch(run_seed=5, step=11, batch_size=64)[0])
    assert not torch.equal(s0[0], paper_task.training_batch(run_seed=6, step=10, batch_size=64)[0])


# ----- evaluation pools (SPEC §1.4) ------------------------------------------------------------------
POOL_SIZE = 1000


def _valid(x, y):
    return x != y and x not in NEVER_LHS and y not in NEVER_RHS


def _forbidden(lhs, rhs):
    return (lhs in NEVER_LHS) + (rhs in NEVER_RHS)


POOL_RULES = {
    # pool: (pair set, rule on the decoded sequence)
    "0var_train": ("train", lambda d: d["n_vars"] == 0),
    "0var_heldout_pair": ("heldout", lambda d: d["n_vars"] == 0),
    "1var_train": ("train", lambda d: d["n_vars"] == 1 and _forbidden(d["lhs_var"], d["rhs_var"]) == 0),
    "1var_heldout_pair": ("heldout", lambda d: d["n_vars"] == 1 and _forbidden(d["lhs_var"], d["rhs_var"]) == 0),
    "1var_restricted_slot": ("train", lambda d: d["n_vars"] == 1 and _forbidden(d["lhs_var"], d["rhs_var"]) == 1),
    "2var_train": ("train", lambda d: d["n_vars"] == 2 and _valid(d["lhs_var"], d["rhs_var"])),
    "2var_heldout_pair": ("heldout", lambda d: d["n_vars"] == 2 and _valid(d["lhs_var"], d["rhs_var"])),
    "2var_restricted_1": (
        "train",
        lambda d: d["n_vars"] == 2 and d["lhs_var"] != d["rhs_var"] and _forbidden(d["lhs_var"], d["rhs_var"]) == 1,
    ),
    "2var_restricted_2": ("train", lambda d: d["n_vars"] == 2 and _forbidden(d["lhs_var"], d["rhs_var"]) == 2),
    "b_operand_1var": ("all", lambda d: d["n_vars"] == 1 and "b" in (d["lhs_var"], d["rhs_var"])),
    "b_operand_2var": (
        "all",
        lambda d: d["n_vars"] == 2 and "b" in (d["lhs_var"], d["rhs_var"]) and d["lhs_var"] != d["rhs_var"],
    ),
}


def test_every_pool_has_a_rule_here():
    assert set(POOL_RULES) == set(POOL_NAMES)


@pytest.mark.parametrize("name", list(POOL_RULES))
def test_each_pool_holds_only_what_its_name_says(paper_task, name):
    train, heldout = split_from_spec()
    pair_set, rule = POOL_RULES[name]
    tokens, labels = paper_task.pool(name, size=POOL_SIZE, seed=0)
    assert tokens.shape == (POOL_SIZE, 16) and labels.shape == (POOL_SIZE,)
    seqs = decode_all(tokens, labels)
    pairs = {(d["num1"], d["num2"]) for d in seqs}
    if pair_set == "train":
        assert pairs <= train
    elif pair_set == "heldout":
        assert pairs <= heldout
    else:
        assert pairs & train and pairs & heldout
    broken = [render(t) for t, d in zip(tokens, seqs) if not rule(d)]
    assert not broken, broken[:3]
    for d in seqs:
        assert 1 <= d["n"] <= 6 and sum(d["gaps"]) == 12 - 2 * d["n"]
        assert d["n"] >= d["n_vars"]


def test_pools_cover_their_whole_variable_sets(paper_task):
    def var_pairs(name):
        return {(d["lhs_var"], d["rhs_var"]) for d in decode_all(*paper_task.pool(name, size=POOL_SIZE))}

    assert var_pairs("2var_restricted_2") == {(x, y) for x in NEVER_LHS for y in NEVER_RHS}
    assert len(var_pairs("2var_restricted_1")) == 36
    assert len(var_pairs("2var_train")) == 92
    slots = var_pairs("1var_restricted_slot")
    assert slots == {(x, None) for x in NEVER_LHS} | {(None, y) for y in NEVER_RHS}
    one = Counter((d["lhs_var"] is None) for d in decode_all(*paper_task.pool("1var_train", size=POOL_SIZE)))
    assert chi_square([one[True], one[False]], [POOL_SIZE / 2] * 2) < CHI2_CRIT[1]  # LHS or RHS, equally likely


def test_pools_are_fixed_by_their_seed(paper_task):
    a = paper_task.pool("2var_heldout_pair", size=300, seed=0)
    assert torch.equal(a[0], paper_task.pool("2var_heldout_pair", size=300, seed=0)[0])
    assert torch.equal(a[0], Task().pool("2var_heldout_pair", size=300, seed=0)[0])
    assert not torch.equal(a[0], paper_task.pool("2var_heldout_pair", size=300, seed=1)[0])
    assert not torch.equal(a[0], paper_task.pool("2var_train", size=300, seed=0)[0])
    with pytest.raises(KeyError, match="unknown pool 'nope'"):
        paper_task.pool("nope")
    with pytest.raises(ValueError, match="positive"):
        paper_task.pool("0var_train", size=0)


# ----- exhaustive sets (SPEC §1.4) -------------------------------------------------------------------
def resolve_operands(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized operand resolution for large sets: (num1, num2, lhs var index or -1, rhs ... -1).

    Asserts each variable operand is assigned exactly once in the prefix.
    """
    out = []
    for slot in (13, 14):
        op = tokens[:, slot]
        is_var = op >= FIRST_VAR
        match = tokens[:, :11] == op[:, None]  # a variable in 0..10; its value follows
        assert (match.sum(1)[is_var] == 1).all()
        assert not (tokens[:, 11] == op)[is_var].any()
        pos = match.argmax(1) + 1
        value = np.where(is_var, tokens[np.arange(len(tokens)), pos], op)
        out.append((value, np.where(is_var, op - FIRST_VAR, -1)))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def test_exhaustive_0var_heldout_is_every_heldout_pair_once(paper_task):
    tokens, labels = paper_task.exhaustive_0var_heldout()
    assert tokens.shape == (1045, 16)
    seqs = decode_all(tokens, labels)
    pairs = [(d["num1"], d["num2"]) for d in seqs]
    assert len(set(pairs)) == 1045 and set(pairs) == split_from_spec()[1]
    assert all(d["n_vars"] == 0 for d in seqs)


def test_exhaustive_2var_union_has_193580_sequences_with_the_right_content(paper_task):
    tokens, labels = paper_task.exhaustive_2var_union()
    assert tokens.shape == (193_580, 16) == (1045 * 92 + 2436 * 40, 16)
    t = tokens.numpy()
    num1, num2, v1, v2 = resolve_operands(t)
    assert (v1 >= 0).all() and (v2 >= 0).all() and (v1 != v2).all()
    assert np.array_equal(labels.numpy(), (num1 + num2) % N)
    keys = ((num1 * N + num2) * 12 + v1) * 12 + v2
    assert len(np.unique(keys)) == len(keys)  # every (pair, variable pair) exactly once
    train, heldout = split_from_spec()
    is_heldout = np.array([(a, b) in heldout for a, b in zip(num1.tolist(), num2.tolist())])
    forbidden = np.isin(v1, [VARS.index(x) for x in NEVER_LHS]).astype(int) + np.isin(
        v2, [VARS.index(x) for x in NEVER_RHS]
    )
    # held-out pairs with the 92 valid variable pairs; training pairs with the 40 restricted ones
    assert (forbidden[is_heldout] == 0).all() and (forbidden[~is_heldout] >= 1).all()
    assert is_heldout.sum() == 1045 * 92
    # Frames and distinct variables on a sample (the full decode is slow in pure Python).
    idx = np.random.default_rng(0).choice(len(t), 3000, replace=False)
    decode_all(tokens[idx], labels[idx])


# ----- operand_sources and value_positions -----------------------------------------------------------
@pytest.mark.parametrize(
    "text, sources, values",
    [
        (SPEC_EXAMPLE, [3, 14], [3, 6, 11]),
        ("PAD PAD PAD PAD PAD PAD PAD PAD PAD PAD PAD PAD + 5 7 =", [13, 14], []),
        ("a 1 b 2 PAD PAD PAD PAD PAD PAD PAD PAD + b a =", [3, 1], [1, 3]),
        ("PAD c 58 PAD PAD PAD PAD PAD PAD PAD d 0 + 4 d =", [13, 11], [2, 11]),
        ("PAD c 58 PAD PAD PAD PAD PAD PAD PAD PAD PAD + e c =", [-1, 2], [2]),  # e is never assigned
    ],
)
def test_operand_sources_and_value_positions_on_hand_written_sequences(text, sources, values):
    tokens = parse(text)[None]
    assert operand_sources(tokens).tolist() == [sources]
    assert value_positions(tokens)[0].nonzero().flatten().tolist() == values
    batch = torch.stack([parse(text), parse(SPEC_EXAMPLE)])
    assert operand_sources(batch).tolist() == [sources, [3, 14]]


def test_operand_sources_point_at_the_operand_values_in_training_batches(paper_task):
    tokens, labels = paper_task.sample_batch(2000, np.random.default_rng(0))
    src = operand_sources(tokens)
    vals = tokens.gather(1, src)
    assert torch.equal((vals[:, 0] + vals[:, 1]) % N, labels)
    vp = value_positions(tokens)
    n_assign = (tokens[:, :12] >= FIRST_VAR).sum(1)
    assert torch.equal(vp.sum(1), n_assign)
    assert vp.gather(1, src.clamp(max=11)).logical_or(src >= 13).all()
