"""Claims side by side: ``hypotheses.session.ClaimRunner`` forks worker processes that inherit the loaded
checkpoint, and a claim's result must not depend on where, in which order or beside what it ran."""

from __future__ import annotations

import json
import sys

import pytest

from assignadd import reference_checkpoint
from assignadd.hypotheses.session import ClaimRunner, load_context, parallel_ok, resolve_jobs

from .test_verify_cli import ERROR, FAIL, PASS, fake_claims, ours, run  # noqa: F401 (fixtures)

REAL = ["identity_qk", "heldout_generalization", "restricted_slot_generalization"]


def run_claims(ctx, ids: list[str], *, jobs: int = 1) -> tuple[list[dict], dict[str, float]]:
    """The claims ``ids`` through a ``ClaimRunner``: (results in the order of ``ids``, {claim: seconds})."""
    results, seconds = {}, {}
    for cid, result, s in ClaimRunner(ctx, ids, jobs=jobs):
        results[cid], seconds[cid] = result.to_dict(), s
    return [results[c] for c in ids], seconds


@pytest.fixture(scope="module")
def reference_ctx():
    return load_context(reference_checkpoint(), seed=0, n=200, device="cpu")[0]


def test_real_claims_in_two_workers_equal_the_same_claims_in_one_process(reference_ctx):
    one, _ = run_claims(reference_ctx, REAL, jobs=1)
    two, seconds = run_claims(reference_ctx, list(reversed(REAL)), jobs=2)
    assert [r["claim"] for r in two] == list(reversed(REAL))  # in the order asked, not the order finished
    assert json.dumps(one, sort_keys=True) == json.dumps(list(reversed(two)), sort_keys=True)
    assert set(seconds) == set(REAL) and all(s > 0 for s in seconds.values())
    assert [r["verdict"] for r in one] == ["pass"] * 3  # real claims ran, not empty results


def test_a_crashing_claim_is_an_error_result_in_a_worker_too(reference_ctx):
    results, _ = run_claims(reference_ctx, [ERROR, PASS], jobs=2)
    assert [r["verdict"] for r in results] == ["error", "pass"]
    assert "boom" in results[0]["reason"]


def test_the_runner_yields_each_claim_once_as_it_finishes(reference_ctx):
    got = [cid for cid, _, _ in ClaimRunner(reference_ctx, [PASS, FAIL, ERROR], jobs=3)]
    assert sorted(got) == sorted([PASS, FAIL, ERROR])


def test_jobs_are_one_where_workers_cannot_fork(reference_ctx, monkeypatch):
    assert resolve_jobs(4, reference_ctx, 2) == 2  # never more workers than claims
    assert resolve_jobs(3, reference_ctx, 7) == 3
    monkeypatch.setattr(reference_ctx, "device", "cuda")
    assert "CPU" in parallel_ok(reference_ctx) and resolve_jobs(4, reference_ctx, 7) == 1
    monkeypatch.setattr(reference_ctx, "device", "cpu")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "fork" in parallel_ok(reference_ctx) and resolve_jobs(None, reference_ctx, 7) == 1


def test_verify_report_is_byte_identical_for_any_jobs(capsys, tmp_path, ours):  # noqa: F811
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run(capsys, ours, "--only", f"{PASS},{FAIL}", "--json", a, "--quiet", "--n", "50", "--jobs", "1")[0] == 1
    assert run(capsys, ours, "--only", f"{PASS},{FAIL}", "--json", b, "--quiet", "--n", "50", "--jobs", "2")[0] == 1
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("bad", ["0", "-2"])
def test_verify_refuses_jobs_below_one(capsys, ours, bad):  # noqa: F811
    code, out, err = run(capsys, ours, "--jobs", bad)
    assert code == 2 and err == f"error: --jobs must be a positive number of processes, got {bad}\n"
