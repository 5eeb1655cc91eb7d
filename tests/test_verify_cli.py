"""`assignadd-verify` as a researcher meets it: exit codes, the terminal table, the report files.

The claims here are small fakes registered for the test (one passes, one fails, one crashes), so
these tests specify the command, not any hypothesis; every run passes ``--only`` with their ids.
"""

from __future__ import annotations

import json
import re
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from assignadd.hypotheses import REGISTRY, Evidence, Hypothesis, Measurement, Threshold, register
from assignadd.model import AssignAddTransformer, save_checkpoint
from assignadd.reports import render
from assignadd.reports.verify_cli import main

PASS, FAIL, ERROR = "fake_verify_pass", "fake_verify_fail", "fake_verify_error"


class _FakePass(Hypothesis):
    id = PASS
    spec = "§0"
    statement = "A fake claim that holds by construction."
    controls = {"reinitialised": "fresh weights", "ablated": "the component ablated"}

    def evidence(self, ctx):
        # Depends on the model (so the report changes with the checkpoint) but is deterministic.
        w = float(ctx.model.embed.W_E.abs().mean())
        return [
            Evidence(
                "accuracy",
                "mean(argmax logits == label)",
                "causal",
                Threshold(0.9, ">=", "paper value"),
                Measurement(0.97, 0.95, 0.985, 2000, {"weight_scale": w}),
                {"reinitialised": Measurement(0.02, 0.01, 0.03, 2000), "ablated": Measurement(0.5, 0.45, 0.55, 2000)},
            ),
            Evidence(
                "margin",
                "diagonal - best off-diagonal",
                "observational",
                Threshold(0.1, "<=", "chance"),
                Measurement.exact(0.05, 12),
                {"reinitialised": Measurement.exact(0.3, 12)},
            ),
        ]


class _FakeFail(Hypothesis):
    id = FAIL
    spec = "§0"
    statement = "A fake claim that fails by construction."

    def evidence(self, ctx):
        return [
            Evidence(
                "accuracy",
                "mean(argmax logits == label)",
                "causal",
                Threshold(0.9, ">=", "paper value"),
                Measurement(0.5, 0.4, 0.6, 100),
            )
        ]


class _FakeError(Hypothesis):
    id = ERROR
    spec = "§0"
    statement = "A fake claim whose code crashes."

    def evidence(self, ctx):
        raise RuntimeError("boom")


@pytest.fixture(scope="module", autouse=True)
def fake_claims():
    for cls in (_FakePass, _FakeFail, _FakeError):
        register(cls)
    yield
    for cls in (_FakePass, _FakeFail, _FakeError):
        REGISTRY.pop(cls.id, None)


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> Path:
    """A checkpoint in our format, with the task in its metadata."""
    path = tmp_path_factory.mktemp("ckpt") / "step_000100.pt"
    save_checkpoint(
        AssignAddTransformer(seed=1),
        path,
        task={
            "f": 0.7,
            "r": 1.0,
            "seed": 42,
            "modulus": 59,
            "n_vars": 12,
            "never_rhs": ["a", "b"],
            "never_lhs": ["k", "l"],
        },
        step=100,
    )
    return path


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """The authors' format: a bare TransformerLens state dict, no config."""
    path = tmp_path_factory.mktemp("authors") / "checkpoint_step_100.pth"
    torch.save(AssignAddTransformer(seed=2).state_dict(), path)
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_all_claims_pass_exits_0_with_table_and_count(capsys, ours):
    code, out, _ = run(capsys, ours, "--only", PASS, "--quiet")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["claim", "verdict"]
    row = next(line for line in lines if line.startswith(PASS))
    assert "PASS" in row and "accuracy = 0.97 [0.95, 0.985]" in row and "lower >= 0.9" in row
    assert "ablated: 0.5 [0.45, 0.55]" in row  # the control closest to passing
    assert lines[-1] == "1 passed of 1 run"


def test_failed_or_crashed_claim_exits_1_and_says_why(capsys, ours):
    code, out, _ = run(capsys, ours, "--only", f"{ERROR},{FAIL},{PASS}", "--quiet")
    assert code == 1
    assert f"{FAIL}: fail: required evidence failed: accuracy" in out
    assert f"{ERROR}: error: RuntimeError: boom" in out
    assert out.strip().splitlines()[-1] == "1 passed, 1 failed, 1 errored of 3 run"
    # registry order, whatever order --only gives
    rows = [line.split()[0] for line in out.splitlines()[2:5]]
    assert rows == [PASS, FAIL, ERROR]


def test_progress_goes_to_stderr_unless_quiet(capsys, ours):
    code, out, err = run(capsys, ours, "--only", PASS)
    assert code == 0 and f"claim 1/1 {PASS}: pass" in err and PASS + ": pass" not in out
    code, _, err = run(capsys, ours, "--only", PASS, "--quiet")
    assert err == ""


def test_progress_in_a_log_is_whole_lines_so_the_table_starts_on_its_own(capsys, ours):
    # stderr is not a terminal here (as in CI logs): no carriage-return bar, every line finished.
    code, out, err = run(capsys, ours, "--only", f"{PASS},{FAIL}")
    assert "\r" not in err and err.endswith("\n")
    # One line per claim as it finishes (claims run side by side, so in either order), counted 1/2, 2/2.
    lines = err.splitlines()
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"]
    assert sorted(re.sub(r" \(\d+\.\d s\)$", "", line.split(" ", 2)[2]) for line in lines) == sorted(
        [f"{PASS}: pass", f"{FAIL}: fail"]
    )
    assert out.startswith("claim ")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{missing}"], "no such file"),
        (["{garbage}"], "garbage.pt: "),
        (["{ours}", "--only", "no_such_claim"], "unknown claim id(s) no_such_claim"),
        (["{ours}", "--only", ","], "--only needs at least one claim id"),
        (["{ours}", "--n", "0"], "--n must be a positive pool size"),
        (["{ours}", "--out", "{garbage}"], "exists and is not a directory"),
        (["{ours}", "--out", "{garbage}/sub"], "cannot write there"),
        (["{ours}", "--json", "{tmp}"], "is a directory"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(capsys, tmp_path, ours, argv, message):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    fill = {"missing": tmp_path / "missing.pt", "garbage": garbage, "ours": ours, "tmp": tmp_path}
    before = sorted(os.listdir(tmp_path))
    code, out, err = run(capsys, *[a.format(**fill) for a in argv], "--quiet")
    assert code == 2
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err
    assert sorted(os.listdir(tmp_path)) == before  # nothing left behind


@pytest.mark.parametrize("argv", [["--no-such-flag"], ["--seed", "x"], ["--device", "tpu"], ["--n"]])
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.endswith(" (see assignadd-verify --help)\n") and err.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_is_bad_input(capsys, ours):
    code, _, err = run(capsys, ours, "--only", PASS, "--device", "cuda")
    assert code == 2 and err == "error: --device cuda: CUDA is not available on this machine\n"


def test_missing_reference_checkpoint_is_one_clear_line(capsys, monkeypatch, tmp_path):
    from assignadd.reports import verify_cli

    monkeypatch.setattr(verify_cli, "reference_checkpoint", lambda: tmp_path / "reference.pt")
    code, _, err = run(capsys, "--only", PASS)
    assert code == 2
    assert (
        err == f"error: the bundled reference checkpoint is missing ({tmp_path / 'reference.pt'}); "
        f"pass a checkpoint path\n"
    )


def test_report_json_is_deterministic_and_complete(capsys, tmp_path, ours):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run(capsys, ours, "--only", f"{PASS},{FAIL}", "--json", a, "--quiet", "--seed", "3", "--n", "50")[0] == 1
    assert run(capsys, ours, "--only", f"{PASS},{FAIL}", "--json", b, "--quiet", "--seed", "3", "--n", "50")[0] == 1
    assert a.read_bytes() == b.read_bytes()
    r = json.loads(a.read_text())
    assert r["schema"] == "assignadd.verify/1"
    assert r["checkpoint"]["path"] == str(ours)
    assert r["checkpoint"]["format"] == "assignadd.checkpoint/1" and r["checkpoint"]["step"] == 100
    import hashlib

    assert r["checkpoint"]["sha256"] == hashlib.sha256(ours.read_bytes()).hexdigest()
    assert r["model_config"]["d_model"] == 128 and r["task"]["f"] == 0.7 and r["task_source"] == "checkpoint"
    assert (r["seed"], r["n"], r["only"]) == (3, 50, [PASS, FAIL])
    assert r["summary"] == {
        "passed": 1,
        "total": 2,
        "all_passed": False,
        "failed": [FAIL],
        "inconclusive": [],
        "errors": [],
        "not_run": [],
    }
    assert r["not_run"] == []  # --only chose the claims
    assert [c["claim"] for c in r["claims"]] == [PASS, FAIL]
    assert r["claims"][0]["evidence"][0]["controls"]["reinitialised"]["passed"] is False
    assert "timings" not in r["claims"][0]


def test_authors_bare_state_dict_loads_with_the_default_task(capsys, tmp_path, bare):
    out = tmp_path / "r.json"
    code, _, _ = run(capsys, bare, "--only", PASS, "--json", out, "--quiet")
    assert code == 0
    r = json.loads(out.read_text())
    assert r["checkpoint"]["format"] == "transformer_lens"
    assert r["checkpoint"]["step"] == 100 and r["checkpoint"]["step_source"] == "file name"  # checkpoint_step_100.pth
    assert r["task_source"] == "default" and r["task"]["seed"] == 42


def test_out_dir_holds_every_report_and_junit_marks_failures(capsys, tmp_path, ours):
    out = tmp_path / "deep" / "report"
    code, _, _ = run(
        capsys,
        ours,
        "--only",
        f"{PASS},{FAIL},{ERROR}",
        "--out",
        out,
        "--quiet",
        "--n",
        "50",
        "--junit",
        tmp_path / "extra.xml",
    )
    assert code == 1
    assert sorted(os.listdir(out)) == ["junit.xml", "report.html", "report.json", "report.md", "timings.json"]
    assert [p for p in os.listdir(out.parent) if p != "report"] == []  # no staging folder left
    assert (tmp_path / "extra.xml").read_text() == (out / "junit.xml").read_text()

    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases[PASS].find("failure") is None
    assert cases[FAIL].find("failure").get("message") == "required evidence failed: accuracy"
    assert cases[ERROR].find("error").get("message") == "RuntimeError: boom"

    timings = json.loads((out / "timings.json").read_text())
    assert set(timings["claims"]) == {PASS, FAIL, ERROR} and timings["total_seconds"] > 0

    md = (out / "report.md").read_text()
    assert "**1 passed, 1 failed, 1 errored of 3 run**" in md and f"## {PASS} — PASS" in md
    assert "controls: ablated 0.5 [0.45, 0.55] (fails, as it should)" in md

    page = (out / "report.html").read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    imgs = page.count("<img ")
    assert imgs == page.count('src="data:image/png;base64,') == 7 + 2  # 7 model figures, 2 forest plots
    for key in (
        "attention_layer1",
        "attention_layer2",
        "positional_qk",
        "identity_matrix",
        "resid_mid_cosine",
        "fourier_neuron",
        "fourier_spectrum",
        f"forest_{PASS}",
        f"forest_{FAIL}",
    ):
        assert f'id="fig-{key}"' in page


def test_an_existing_out_folder_gets_each_file_replaced_and_nothing_else(tmp_path):
    from assignadd.fileio import commit_folder

    out, staging = tmp_path / "out", tmp_path / ".out.tmp"
    out.mkdir()
    staging.mkdir()
    (out / "report.json").write_text("old")
    (out / "notes.txt").write_text("mine")
    (staging / "report.json").write_text("new")
    commit_folder(staging, out)
    assert (out / "report.json").read_text() == "new" and (out / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_terminal_table_reads_from_the_report_dict_alone():
    report = render.build_report(
        checkpoint={"path": "x.pt", "sha256": "0", "format": "f", "step": None},
        model_config={},
        task={},
        task_source="default",
        seed=0,
        n=10,
        device="cpu",
        only=None,
        claims=[],
        tool_version="0",
    )
    assert report["summary"]["all_passed"] is False  # nothing verified is not a pass
    assert render.terminal_table(report).strip().splitlines()[-1] == "0 passed of 0 run"


def test_console_script_points_at_main():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "assignadd-verify"]
    assert ep.value == "assignadd.reports.verify_cli:main"
