"""Every re-initialised null a reason quotes is a number the package measured (docs/nulls.json, written by
tools/measure_nulls.py), and the cheap ones re-measure the same today on every shipped shape.

A reason (``Threshold.reason``) quotes a null as "re-initialised 0.53-0.69" or "re-init 0.25": the first
number within a few words of "re-init", in the same clause (up to the next ';'); "two heads X" or "three
layers X" later in that clause quote the null on that shape. Each quoted number must lie in the measured
range of its item on that shape, and the quoted range must cover it, within TOL. TOL = 0.02: reasons quote
two decimals (rounding moves a bound by at most 0.005), and the rest is room for a re-measurement on
another BLAS or thread count; a null that moved by more than that is a different null, to be re-measured
and re-quoted.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

import assignadd
from assignadd.hypotheses import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "measure_nulls.py"
NULLS = json.loads((ROOT / "docs" / "nulls.json").read_text())
TOL = 0.02
FIX = "rerun: python tools/measure_nulls.py, and quote the ranges it writes in docs/nulls.md"

_NUMBER = r"(?<![\w^/.,])(?<!Layer )(?<!layer )(?P<lo>\d+(?:\.\d+)?)(?:\s*-\s*(?P<hi>\d+(?:\.\d+)?))?(?![\w/]|[.,]\d)"
MENTION = re.compile(r"re-init(?:iali[sz]ed)?\b", re.IGNORECASE)
FIRST = re.compile(r"^(?P<gap>\W*(?:[^\s;]+\s+){0,8}?[^\s;\d]*?)" + _NUMBER)
SHAPE = re.compile(r"\b(?P<shape>two heads|three layers)(?:(?= of \d) of \d+|(?! of \d))\b[^;\d]{0,12}?" + _NUMBER)
SHAPES = {"two heads": "two_heads", "three layers": "three_layers"}


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("measure_nulls", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quotes(reason: str) -> list[tuple[str, float, float, str]]:
    """Every quoted re-initialised null in ``reason``: (shape, low, high, the text quoted)."""
    out = []
    for mention in MENTION.finditer(reason):
        clause = reason[mention.end() :].split(";", 1)[0]
        first = FIRST.match(clause)
        if not first:
            continue
        lo, hi = float(first["lo"]), float(first["hi"] or first["lo"])
        out.append(("paper", lo, hi, reason[mention.start() : mention.end() + first.end()]))
        for m in SHAPE.finditer(clause, first.end()):
            out.append((SHAPES[m["shape"]], float(m["lo"]), float(m["hi"] or m["lo"]), m.group(0)))
    return out


def reasons() -> list[tuple[str, str, str]]:
    """(claim, item, reason) for every item of every registered per-checkpoint claim."""
    return [(cid, item.name, item.threshold.reason) for cid, cls in REGISTRY.items() for item in cls.items]


def measured(shape: str, claim: str, item: str) -> dict:
    return NULLS["shapes"][shape]["claims"][claim][item]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("nulls: re-initialised 0.53-0.69, input space rotated 0.02-0.21", [("paper", 0.53, 0.69)]),
        ("a re-initialised head: 0.07", [("paper", 0.07, 0.07)]),
        ("identity_qk's `=` item); re-initialised: 0.0. Re-registered 2026-12", [("paper", 0.0, 0.0)]),
        ("a re-initialised Layer 1 writes a readable identity in ~0.53", [("paper", 0.53, 0.53)]),
        ("nulls: re-initialised OV_2 0.98-1.03, input space rotated 0.94", [("paper", 0.98, 1.03)]),
        ("chance 1/59, re-init 0.012-0.014", [("paper", 0.012, 0.014)]),
        ("a re-initialised model ~0.5 by symmetry", [("paper", 0.5, 0.5)]),
        ("null models (re-init, steps 100-200 of seeds 0, 42)", [("paper", 100.0, 200.0)]),
        (
            "re-initialised 0.00-0.01 (docs/nulls.md; two heads 0.98-1.00, three layers 0.10)",
            [("paper", 0.0, 0.01)],  # the ';' ends the clause: a shape's quote goes before it
        ),
        (
            "re-initialised 0.53-0.69 (two heads 0.98-1.00, three layers 0.10; docs/nulls.md)",
            [("paper", 0.53, 0.69), ("two_heads", 0.98, 1.0), ("three_layers", 0.1, 0.1)],
        ),
        (
            "a re-initialised head loses 0.48-0.51, two heads of 64 0.30-0.33 (docs/nulls.md: on two heads of 64)",
            [("paper", 0.48, 0.51), ("two_heads", 0.30, 0.33)],
        ),
        ("not a re-initialised model; 0.5 of them", []),
        ("a re-initialised model's margins", []),
    ],
)
def test_the_quote_pattern_reads_every_form_a_reason_has_used(text, expected):
    assert [q[:3] for q in quotes(text)] == expected


def test_every_item_of_every_claim_has_its_null_measured_on_every_shape():
    for shape, s in NULLS["shapes"].items():
        for cid, name, _ in reasons():
            assert name in s["claims"].get(cid, {}), f"{cid}.{name}: no null measured on {shape}; {FIX}"
            assert len(s["claims"][cid][name]["values"]) == len(NULLS["seeds"])


def test_every_quoted_re_initialised_number_is_a_measured_null():
    """A reason's re-initialised number must lie in its item's measured range on that shape (and its range
    cover the measured one), so a quoted null nobody measured, or one that has moved, fails here."""
    wrong = []
    for cid, name, reason in reasons():
        for shape, lo, hi, text in quotes(reason):
            s = measured(shape, cid, name)
            if s["min"] is None:
                wrong.append(f"{cid}.{name} quotes {text!r}: nothing measured on {shape}")
                continue
            inside = s["min"] - TOL <= lo <= hi <= s["max"] + TOL
            covers = lo <= s["min"] + TOL and hi >= s["max"] - TOL
            if not (inside and covers):
                wrong.append(f"{cid}.{name} quotes {text!r}; measured on {shape}: {s['min']:.3f}-{s['max']:.3f}")
    assert not wrong, f"{FIX}:\n" + "\n".join(wrong)


def test_a_reason_that_quotes_a_null_names_where_it_was_measured():
    for cid, name, reason in reasons():
        if quotes(reason):
            assert "docs/nulls.md" in reason, f"{cid}.{name}: a quoted null names docs/nulls.md"


def test_learning_phases_quotes_no_permuted_number_it_did_not_measure():
    from assignadd.hypotheses.learning_phases import COHERENCE

    series = NULLS["series"]["learning_phases"]["items"]
    values = [v for item in series.values() for v in item["permuted_steps"].values() if v is not None]
    for m in re.finditer(r"permuted[^;]*?" + _NUMBER, COHERENCE.reason):
        lo, hi = float(m["lo"]), float(m["hi"] or m["lo"])
        inside = min(values) - TOL <= lo <= hi <= max(values) + TOL
        assert inside and hi >= max(values) - TOL, f"{m.group(0)!r}: not the range docs/nulls.json holds"
        assert "docs/nulls.md" in COHERENCE.reason


def test_nulls_page_is_rendered_from_the_json(tool):
    assert (ROOT / "docs" / "nulls.md").read_text() == tool.render(NULLS), "run: python tools/measure_nulls.py --render"


WEIGHTS_ONLY = [
    (cid, item) for cid, cls in REGISTRY.items() for item in cls.items if (item.site or "").startswith("weights:")
]


def test_the_weights_only_items_are_the_ones_re_measured_below():
    assert {i.name for _, i in WEIGHTS_ONLY} >= {
        "positional_previous_token",
        "identity_block_diagonal",
        "ov1_transmits_variables",
        "ov2_transmits_numbers",
    }


@pytest.mark.parametrize("seed", [0, 4])
@pytest.mark.parametrize("shape", ["paper", "two_heads", "three_layers"])
def test_weights_only_nulls_re_measure_in_their_range(tool, shape, seed):
    """Re-measured today on the re-initialised model of each shipped shape: in the JSON's range, and the same
    as the value recorded for that seed."""
    cfg, components = tool.shapes()[shape]
    ctx = tool.reinitialised_context(cfg, components, seed, NULLS["n"])
    for cid, item in WEIGHTS_ONLY:
        v = tool.measure_item(ctx, item).value
        s = measured(shape, cid, item.name)
        assert s["min"] - TOL <= v <= s["max"] + TOL, f"{shape} seed {seed}: {cid}.{item.name} = {v:.4f}; {FIX}"
        assert v == pytest.approx(s["values"][NULLS["seeds"].index(seed)], abs=TOL)


@pytest.mark.skipif(not assignadd.reference_checkpoint().exists(), reason="the bundled reference is missing")
def test_the_measured_null_is_the_claims_own_reinitialised_control_on_the_reference():
    """What the claims measure as ``reinitialised`` on the reference (context seed 0) is the tool's seed-0 null."""
    import torch

    from assignadd import Task, load_checkpoint
    from assignadd.hypotheses import Context
    from assignadd.hypotheses.base import Arm

    ctx = Context(load_checkpoint(assignadd.reference_checkpoint()), Task(), n=NULLS["n"], seed=0)
    for cid, item in WEIGHTS_ONLY:
        with torch.no_grad():
            m = item.measure(ctx, Arm(ctx.reinitialised_model()))
        v = m.extra["per_model"][0] if "per_model" in m.extra else m.value  # a pooled control: its first draw
        assert v == pytest.approx(measured("paper", cid, item.name)["values"][0], abs=TOL), f"{cid}.{item.name}"


def quotes_range(m: re.Match, s: dict) -> bool:
    """Whether the quoted number or range ``m`` (``_NUMBER``'s groups) lies in the measured range ``s`` and
    covers it, within TOL."""
    lo, hi = float(m["lo"]), float(m["hi"] or m["lo"])
    return s["min"] - TOL <= lo <= hi <= s["max"] + TOL and lo <= s["min"] + TOL and hi >= s["max"] - TOL


def test_every_quoted_mutant_null_is_measured_and_the_reason_quotes_its_range(tool):
    """A bar that quotes what a break of its component gives ("input space rotated 0.02-0.21") quotes the
    range tools/measure_nulls.py measured on that mutant of the reference (``MUTANT_NULLS``), within TOL."""
    items = {(cid, item.name): item.threshold.reason for cid, cls in REGISTRY.items() for item in cls.items}
    assert set(tool.MUTANT_NULLS) <= set(items)
    for (cid, name), (mutant, words) in tool.MUTANT_NULLS.items():
        s = NULLS["mutants"]["claims"][cid][name]
        assert s["mutant"] == mutant and len(s["values"]) == len(tool.MUTANT_SEEDS), f"{cid}.{name}: {FIX}"
        m = re.search(re.escape(words) + r"\s+" + _NUMBER, items[(cid, name)])
        assert m, f"{cid}.{name}: its reason does not quote {words!r} with a number"
        assert quotes_range(m, s), f"{cid}.{name} quotes {m.group(0)!r}; measured {s['min']}-{s['max']}; {FIX}"


def test_a_reason_quoting_a_rotation_of_its_input_quotes_a_measured_mutant(tool):
    """Every 'input rotated X' in a bar's reason is one ``MUTANT_NULLS`` measures: none quoted unmeasured."""
    measured_items = set(tool.MUTANT_NULLS)
    for cid, name, reason in reasons():
        if re.search(r"input (space )?rotated\s+\d", reason):
            assert (cid, name) in measured_items, f"{cid}.{name} quotes a rotated-input number nobody measured"


@pytest.mark.parametrize(
    "claim, item", [("previous_token_head", "ov1_transmits_variables"), ("shared_residual", "ov2_transmits_numbers")]
)
def test_the_weights_only_mutant_nulls_measure_the_same_today(tool, claim, item):
    mutant, _ = tool.MUTANT_NULLS[(claim, item)]
    s = NULLS["mutants"]["claims"][claim][item]
    assert abs(tool.measure_mutant(claim, item, mutant, seed=0) - s["values"][0]) <= TOL


def test_every_quoted_early_checkpoint_null_is_measured_and_quoted_as_measured(tool):
    """A bar that quotes the shipped run before its mechanism forms ("steps 500-2000 of the shipped run
    0.65-0.75") quotes the range tools/measure_nulls.py measured there (``STEP_NULLS``), within TOL; and no
    reason quotes another run's steps any more."""
    items = {(cid, item.name): item.threshold.reason for cid, cls in REGISTRY.items() for item in cls.items}
    for (cid, name), (steps, words) in tool.STEP_NULLS.items():
        s = NULLS["steps"]["claims"][cid][name]
        assert s["steps"] == list(steps), f"{cid}.{name}: {FIX}"
        m = re.search(re.escape(words) + r"\s+" + _NUMBER, items[(cid, name)])
        assert m, f"{cid}.{name}: its reason does not quote {words!r} with a number"
        assert quotes_range(m, s), f"{cid}.{name} quotes {m.group(0)!r}; measured {s['min']}-{s['max']}; {FIX}"
    for (cid, name), reason in items.items():
        assert not re.search(r"\bsteps? \d[\d,]*(-\d[\d,]*)? of seeds?\b", reason), f"{cid}.{name}: unmeasured steps"


def test_the_ov1_items_re_initialised_control_fails_on_every_shipped_shape(tool):
    """The control pools five re-initialised draws (previous_token_head.REINIT_DRAWS): on every shipped shape
    it fails the 0.99 bar with room to spare, where one draw of the two-head shape sat at 0.993."""
    from assignadd import Task
    from assignadd.hypotheses.base import Arm, Context, Evidence
    from assignadd.hypotheses.previous_token_head import REINIT_DRAWS, TRANSMITS, transmits
    from assignadd.model import AssignAddTransformer

    for shape, (cfg, components) in tool.shapes().items():
        model = AssignAddTransformer(cfg, seed=3)  # the model under test: only its shape matters here
        ctx = Context(model, Task(), n=100, components=components)
        m = transmits(ctx, Arm(ctx.reinitialised_model()))
        assert len(m.extra["per_model"]) == REINIT_DRAWS and m.n == 1000 * REINIT_DRAWS, shape
        e = Evidence("ov1_transmits_variables", "", "observational", TRANSMITS, m)
        assert e.status == "fail" and m.high < 0.9, (shape, m.value, m.extra["per_model"])
