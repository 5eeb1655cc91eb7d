"""``--precision auto`` (training/precision.py): chosen by measurement, safely, once per run.

The decision and the time budget are tested on fake steps with a fake clock, so they know the answer
by construction (a 10x slower bf16 loses, a 2x faster safe one wins, a fast one that returns NaN
loses). Then the real trainer, on a tiny run: run.json, sweep.json and the log say what was chosen and
why, and a resumed run keeps its precision. No test asserts a time measured on this machine.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from assignadd.model import load_checkpoint_full
from assignadd.training import precision
from assignadd.training.precision import (
    BUDGET_S,
    Measurement,
    PrecisionChoice,
    StepProbe,
    check_safety,
    decide,
    measure,
)
from assignadd.training.grid import SweepConfig
from assignadd.training.sweep import run_sweep
from assignadd.training.train import TrainConfig, train

TINY = dict(steps=2, batch_size=16, eval_size=5, eval_every=1, checkpoint_every=1)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeProbe(StepProbe):
    """Steps that cost ``seconds[precision][size]`` on a fake clock and return a fixed loss and
    gradient; ``loss``/``grad_error`` make a candidate's safety sample differ from fp32's."""

    def __init__(
        self,
        clock: FakeClock,
        seconds: dict,
        loss: dict | None = None,
        grad_error: dict | None = None,
        batch_size: int = 512,
    ):
        self.clock, self.seconds = clock, seconds
        self.loss, self.grad_error = loss or {}, grad_error or {}
        self.made: list[tuple[str, str]] = []
        workload = {"step": "fake", "models": 1, "batch_size": batch_size}
        super().__init__(self._make, scout={"step": "fake", "models": 1, "batch_size": 64}, workload=workload)

    def _make(self, name: str, size: str):
        self.made.append((name, size))

        def step():
            self.clock.now += self.seconds[name][size]
            grad = torch.ones(100) * (1 + self.grad_error.get(name, 0.0))
            return self.loss.get(name, 4.0), [grad]

        return step


def speeds(fp32_scout, bf16_scout, fp32_full=None, bf16_full=None) -> dict:
    """Seconds per step for each candidate at each size (full size: 8x the scout by default)."""
    return {
        "fp32": {"scout": fp32_scout, "workload": fp32_full or 8 * fp32_scout},
        "bf16": {"scout": bf16_scout, "workload": bf16_full or 8 * bf16_scout},
    }


def measured(fp32: float, bf16: float, *, safe: bool = True) -> dict:
    return {
        "fp32": Measurement("fp32", True, "the reference", fp32, fp32),
        "bf16": Measurement(
            "bf16", safe, "ok" if safe else "loss is nan", bf16 if safe else None, bf16 if safe else None
        ),
    }


# ----- the decision --------------------------------------------------------------------------------------
def test_bf16_ten_times_slower_than_fp32_is_not_chosen():
    chosen, reason = decide(measured(fp32=8.9, bf16=0.8))
    assert chosen == "fp32" and "slower than fp32" in reason


def test_bf16_twice_as_fast_and_safe_is_chosen():
    chosen, reason = decide(measured(fp32=9.0, bf16=18.0))
    assert chosen == "bf16" and "2.00x" in reason


def test_bf16_faster_but_unsafe_is_not_chosen():
    chosen, reason = decide(measured(fp32=9.0, bf16=18.0, safe=False))
    assert chosen == "fp32" and "not safe" in reason


def test_bf16_within_the_margin_of_fp32_keeps_fp32():
    chosen, reason = decide(measured(fp32=9.0, bf16=9.9))  # 1.1x: inside timing noise
    assert chosen == "fp32" and "under the 1.15x needed" in reason


def test_rates_are_compared_at_the_same_size():
    """A candidate timed only at the small scout size is compared with fp32's scout rate, not with
    fp32's (much lower) full-size rate."""
    m = {
        "fp32": Measurement("fp32", True, "the reference", 60.0, 9.0),
        "bf16": Measurement("bf16", True, "ok", 20.0, None),
    }
    assert decide(m)[0] == "fp32"


def test_safety_check_catches_nan_inf_and_a_wrong_gradient():
    ref = [torch.ones(10)]
    assert check_safety(4.0, [torch.ones(10) * 1.02], 4.0, ref)[0]
    assert check_safety(float("nan"), ref, 4.0, ref) == (False, "loss is nan")
    bad = torch.ones(10)
    bad[3] = float("inf")
    assert not check_safety(4.0, [bad], 4.0, ref)[0]
    assert not check_safety(4.0, [torch.ones(10) * 1.5], 4.0, ref)[0]  # gradient 50% off
    assert not check_safety(4.5, ref, 4.0, ref)[0]  # loss 12% off


# ----- the measurement, on fake steps ---------------------------------------------------------------------
def test_emulated_bf16_forty_times_slower_costs_one_step_and_stays_within_the_budget():
    clock = FakeClock()
    probe = FakeProbe(clock, speeds(0.015, 0.6))  # bf16 40x slower: an AVX2 CPU without bf16
    m = measure(probe, clock=clock)
    assert decide(m)[0] == "fp32"
    assert probe.made.count(("bf16", "scout")) == 1 and ("bf16", "workload") not in probe.made
    assert clock.now <= BUDGET_S


def test_bf16_twice_as_fast_at_full_size_is_measured_there_and_chosen():
    clock = FakeClock()
    # The scout (small batch) shows no gain; the full-size step, where a GPU's bf16 pays, does.
    probe = FakeProbe(clock, speeds(0.002, 0.002, fp32_full=0.040, bf16_full=0.020))
    m = measure(probe, clock=clock)
    assert m["bf16"].workload_steps_per_s == pytest.approx(2 * m["fp32"].workload_steps_per_s, rel=0.1)
    assert decide(m)[0] == "bf16"
    assert clock.now <= BUDGET_S + 0.05  # the last timed step may end just past the budget


def test_bf16_fast_but_nan_is_refused_by_its_safety_sample():
    clock = FakeClock()
    probe = FakeProbe(clock, speeds(0.02, 0.01), loss={"bf16": float("nan")})
    m = measure(probe, clock=clock)
    assert not m["bf16"].safe and m["bf16"].safety == "loss is nan"
    assert decide(m)[0] == "fp32"


def test_a_full_size_step_too_slow_for_the_budget_leaves_the_decision_to_the_scout():
    clock = FakeClock()
    probe = FakeProbe(clock, speeds(0.01, 0.005, fp32_full=0.9, bf16_full=0.45))
    m = measure(probe, clock=clock)
    assert m["fp32"].workload_steps_per_s is None and ("bf16", "workload") not in probe.made
    assert decide(m)[0] == "bf16"  # 2x at the scout size


def test_a_full_size_step_predicted_not_to_fit_is_never_started():
    clock = FakeClock()
    probe = FakeProbe(clock, speeds(0.2, 0.1))  # 8x the sequences at full size: 1.6 s per fp32 step
    m = measure(probe, clock=clock)
    assert not any(size == "workload" for _, size in probe.made)
    assert decide(m)[0] == "bf16" and clock.now <= BUDGET_S


def test_machine_identity_names_cpu_torch_device_and_threads():
    ident = precision.machine_identity("cpu")
    assert {"cpu", "cpu_capability", "torch", "device", "threads"} <= set(ident)
    assert ident["cpu"] and ident["torch"] == torch.__version__ and ident["threads"] == torch.get_num_threads()


# ----- the trainer records it --------------------------------------------------------------------------------
def test_run_json_and_the_log_record_the_measured_choice(tmp_path):
    lines = []
    train(tmp_path / "run", TrainConfig(seed=0, **TINY), progress=False, log=lines.append)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    record = run["precision"]
    assert record["requested"] == "auto" and record["source"] == "measured"
    assert record["chosen"] in ("fp32", "bf16") and run["train"]["bf16"] == (record["chosen"] == "bf16")
    assert set(record["steps_per_s"]["scout"]) == {"fp32", "bf16"} and record["reason"]
    assert record["safety"]["fp32"] == "the reference" and record["machine"]["threads"] == torch.get_num_threads()
    assert len(lines) == 2 and f"precision {record['chosen']} (auto, measured now" in lines[0]
    assert lines[1] == f"{tmp_path / 'run'}: threads: {run['threads']['chosen']} ({run['threads']['reason']})"
    assert load_checkpoint_full(tmp_path / "run" / "final.pt")[1]["run"]["bf16"] == run["train"]["bf16"]


def test_explicit_precision_is_recorded_as_given_and_not_measured(tmp_path, monkeypatch):
    monkeypatch.setattr("assignadd.training.train.choose_precision", lambda *a, **k: pytest.fail("measured"))
    lines = []
    train(tmp_path / "run", TrainConfig(seed=0, precision="fp32", **TINY), progress=False, log=lines.append)
    record = json.loads((tmp_path / "run" / "run.json").read_text())["precision"]
    assert record["requested"] == record["chosen"] == "fp32" and record["source"] == "requested"
    assert lines[0] == f"{tmp_path / 'run'}: precision fp32 (--precision fp32 given)"
    assert len(lines) == 2 and lines[1].startswith(f"{tmp_path / 'run'}: threads: ")  # training/threads.py


def test_a_resumed_auto_run_keeps_the_precision_it_started_with(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    train(run_dir, TrainConfig(seed=0, precision="bf16", **{**TINY, "steps": 1}), progress=False, log=None)
    monkeypatch.setattr("assignadd.training.train.choose_precision", lambda *a, **k: pytest.fail("measured"))
    lines = []
    train(run_dir, TrainConfig(seed=0, **TINY), progress=False, log=lines.append)  # auto
    assert "precision bf16 (auto, resumed: run.json records bf16" in lines[0]
    assert json.loads((run_dir / "run.json").read_text())["precision"]["source"] == "requested"  # written once


def test_a_sweep_decides_once_and_records_it_in_sweep_json_and_every_point(tmp_path):
    out = tmp_path / "sweep"
    cfg = SweepConfig(param="f", values=(0.5, 0.7), seeds=(0,), **TINY)
    lines = []
    run_sweep(out, cfg, progress=False, log=lines.append)
    doc = json.loads((out / "sweep.json").read_text())
    record = doc["precision"]
    assert record["requested"] == "auto" and record["source"] == "measured"
    assert doc["grid"]["bf16"] == (record["chosen"] == "bf16")
    for name in ("f=0.5_seed=0", "f=0.7_seed=0"):
        assert json.loads((out / "points" / name / "run.json").read_text())["precision"] == record
    assert len(lines) == 1 and f"precision {record['chosen']}" in lines[0]
    lines.clear()
    run_sweep(out, cfg, progress=False, log=lines.append)  # continued: keeps its decision and its record
    assert "continued: sweep.json records" in lines[0]
    assert json.loads((out / "sweep.json").read_text())["precision"] == record
    run_sweep(out, replace(cfg, precision=record["chosen"]), progress=False, log=None)
    assert json.loads((out / "sweep.json").read_text())["precision"] == record  # the same choice, given


def test_choice_round_trips_through_a_dict():
    c = PrecisionChoice(
        requested="auto",
        chosen="bf16",
        reason="r",
        source="measured",
        steps_per_s={"scout": {"fp32": 1.0, "bf16": 2.0}, "workload": {}},
        sizes={"scout": {"batch_size": 64}, "workload": {"batch_size": 512}},
    )
    assert PrecisionChoice.from_dict({**c.to_dict(), "unknown": 1}) == c
    assert c.use_bf16 and "fp32 1.00, bf16 2.00" in c.log_line()
