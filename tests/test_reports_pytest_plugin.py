"""The pytest plugin: ``pytest --assignadd-checkpoint PATH`` collects one item per claim per checkpoint."""

from __future__ import annotations

import pytest
import torch

from assignadd.hypotheses import REGISTRY, register
from assignadd.model import AssignAddTransformer, save_checkpoint

from .test_verify_cli import FAIL, PASS, _FakeFail, _FakePass

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def fake_claims():
    for cls in (_FakePass, _FakeFail):
        register(cls)
    yield
    for cls in (_FakePass, _FakeFail):
        REGISTRY.pop(cls.id, None)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("plugin")
    ours, bare = d / "step_000100.pt", d / "checkpoint_step_100.pth"
    save_checkpoint(AssignAddTransformer(seed=1), ours, step=100)
    torch.save(AssignAddTransformer(seed=2).state_dict(), bare)
    return ours, bare


def test_one_item_per_claim_per_checkpoint_failing_with_the_reason(pytester, checkpoints):
    ours, bare = checkpoints
    result = pytester.runpytest_inprocess(
        "--assignadd-checkpoint",
        str(ours),
        "--assignadd-checkpoint",
        str(bare),
        "--assignadd-only",
        f"{FAIL},{PASS}",
        "--assignadd-n",
        "20",
        "-m",
        "assignadd_claim",
        "-v",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*collected 4 items",
            f"*assignadd.claims::{PASS}[[]step_000100.pt] PASSED*",
            f"*assignadd.claims::{FAIL}[[]step_000100.pt] FAILED*",
            f"*assignadd.claims::{PASS}[[]checkpoint_step_100.pth] PASSED*",
            f"*assignadd.claims::{FAIL}[[]checkpoint_step_100.pth] FAILED*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            f"{FAIL} (§0): fail: required evidence failed: accuracy",
            "*accuracy** (causal): 0.5 [[]0.4, 0.6], n = 100; needs lower >= 0.9: **FAIL**",
        ]
    )


def test_an_unloadable_checkpoint_fails_its_items_with_one_line(pytester):
    bad = pytester.path / "bad.pt"
    bad.write_bytes(b"nope")
    result = pytester.runpytest_inprocess(
        "--assignadd-checkpoint", str(bad), "--assignadd-only", PASS, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["cannot load the checkpoint: *bad.pt: *"])


def test_unknown_claim_id_is_a_usage_error(pytester, checkpoints):
    result = pytester.runpytest_inprocess(
        "--assignadd-checkpoint", str(checkpoints[0]), "--assignadd-only", "no_such_claim", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--assignadd-only: unknown claim id(s) no_such_claim*"])


def test_without_the_option_the_plugin_adds_nothing(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_junit_has_a_classname_and_a_one_line_failure_message(pytester, checkpoints):
    import xml.etree.ElementTree as ET

    ours, _ = checkpoints
    junit = pytester.path / "claims.xml"
    pytester.runpytest_inprocess(
        "--assignadd-checkpoint",
        str(ours),
        "--assignadd-only",
        f"{FAIL},{PASS}",
        "--assignadd-n",
        "20",
        "-m",
        "assignadd_claim",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
    )
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {f"{PASS}[step_000100.pt]", f"{FAIL}[step_000100.pt]"}
    assert {c.get("classname") for c in cases.values()} == {"assignadd.claims"}
    failure = cases[f"{FAIL}[step_000100.pt]"].find("failure")
    assert failure.get("message") == f"{FAIL} (§0): fail: required evidence failed: accuracy"
    assert "needs lower >= 0.9: **FAIL**" in failure.text  # the evidence is in the text, not the message


def test_a_checkpoint_without_a_task_takes_one_from_the_options(pytester, checkpoints):
    _, bare = checkpoints
    result = pytester.runpytest_inprocess(
        "--assignadd-checkpoint",
        str(bare),
        "--assignadd-only",
        PASS,
        "--assignadd-n",
        "20",
        "--assignadd-f",
        "0.5",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
