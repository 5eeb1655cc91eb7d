"""Training (SPEC §3): the run folder, exact resumption, and clear refusals of bad options.

Runs here are tiny (30 steps of batch 64 on CPU): they test the bookkeeping, not learning.
"""

from __future__ import annotations

import json

import pytest
import torch

from assignadd import load_checkpoint
from assignadd.data import POOL_NAMES
from assignadd.model import load_checkpoint_full
from assignadd.training.threads import BUDGET_S, COLD_LIMIT_S, decide, measure
from assignadd.training.train import TrainConfig, TrainError, recorded_precision, train
from assignadd.training.train_cli import main as train_main

STEPS, EVERY = 30, 10


def small_config(**overrides) -> TrainConfig:
    settings = dict(seed=3, steps=STEPS, batch_size=64, eval_size=50, checkpoint_every=EVERY, eval_every=EVERY)
    return TrainConfig(**{**settings, **overrides})


def metric_lines(run_dir) -> list[dict]:
    """metrics.jsonl without its wall-clock field (the only part allowed to differ between runs)."""
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if k != "wall_s"} for line in lines]


def state(path) -> dict:
    return load_checkpoint(path).state_dict()


def bit_identical(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """An uninterrupted short run."""
    run_dir = tmp_path_factory.mktemp("full") / "run"
    final = train(run_dir, small_config(), progress=False)
    return run_dir, final


# ----- the run folder --------------------------------------------------------------------------------
def test_short_run_writes_run_json_checkpoints_and_metrics(full_run):
    run_dir, final = full_run
    assert final == run_dir / "final.pt" and final.exists()
    header = json.loads((run_dir / "run.json").read_text())
    assert header["format"] == "assignadd.run/1"
    assert header["train"]["seed"] == 3 and header["train"]["lr"] == 1e-3 and header["train"]["batch_size"] == 64
    assert header["task"]["f"] == 0.7 and header["task"]["seed"] == 42
    assert header["model_config"]["d_vocab"] == 74
    names = sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt"))
    assert names == ["step_000000.pt", "step_000010.pt", "step_000020.pt", "step_000030.pt"]
    lines = metric_lines(run_dir)
    assert [line["step"] for line in lines] == [0, 10, 20, 30]
    assert lines[0]["loss"] is None and all(line["loss"] > 0 for line in lines[1:])
    for line in lines:
        assert set(line["accuracy"]) == set(POOL_NAMES)
        assert all(0.0 <= acc <= 1.0 for acc in line["accuracy"].values())


def test_checkpoints_carry_their_step_and_metrics_and_the_last_equals_final(full_run):
    run_dir, final = full_run
    lines = {line["step"]: line["accuracy"] for line in metric_lines(run_dir)}
    for step in (0, 10, 20, 30):
        model, meta = load_checkpoint_full(run_dir / "checkpoints" / f"step_{step:06d}.pt")
        assert meta["step"] == step and meta["metrics"] == lines[step]
        assert meta["task"]["f"] == 0.7 and meta["run"]["seed"] == 3
    assert bit_identical(state(run_dir / "checkpoints" / "step_000030.pt"), state(final))
    assert not bit_identical(state(run_dir / "checkpoints" / "step_000000.pt"), state(final))  # it trained


def test_training_leaves_biases_and_layer1_mlp_at_zero(full_run):
    model = load_checkpoint(full_run[1])
    assert model.biases_are_zero()
    assert not model.blocks[0].mlp.W_in.any() and not model.blocks[0].mlp.W_out.any()


# ----- resumption ------------------------------------------------------------------------------------
def full_run_precision(full_dir) -> str:
    """The precision the uninterrupted run decided (``auto`` is measured per run, and two runs on a busy
    machine may decide differently; a run compared with it bit for bit must train in the same one)."""
    return recorded_precision(json.loads((full_dir / "run.json").read_text())["train"])


def test_interrupted_then_resumed_run_ends_bit_identical(tmp_path, full_run):
    full_dir, full_final = full_run
    run_dir = tmp_path / "run"
    same = full_run_precision(full_dir)
    partial = train(run_dir, small_config(precision=same), progress=False, stop_after=15)  # killed between checkpoints
    assert partial == run_dir / "resume.pt"
    assert not (run_dir / "final.pt").exists()
    assert torch.load(partial, weights_only=True)["step"] == 10
    final = train(run_dir, small_config(precision=same), progress=False)
    assert bit_identical(state(final), state(full_final))
    assert metric_lines(run_dir) == metric_lines(full_dir)  # the log, too, as if never interrupted
    names = sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt"))
    assert names == ["step_000000.pt", "step_000010.pt", "step_000020.pt", "step_000030.pt"]


def test_resumed_run_can_be_extended(tmp_path, full_run):
    run_dir = tmp_path / "run"
    same = full_run_precision(full_run[0])
    train(run_dir, small_config(steps=20, precision=same), progress=False)
    final = train(run_dir, small_config(steps=STEPS, precision=same), progress=False)  # steps may grow on resume
    assert bit_identical(state(final), state(full_run[1]))


@pytest.mark.parametrize("change", [{"lr": 2e-3}, {"seed": 4}, {"f": 0.6}, {"batch_size": 32}, {"precision": "bf16"}])
def test_resuming_with_other_settings_is_refused(tmp_path, change):
    run_dir = tmp_path / "run"
    train(run_dir, small_config(steps=1, eval_size=5, precision="fp32"), progress=False)  # auto may pick bf16
    with pytest.raises(TrainError, match="holds a run with other settings"):
        train(run_dir, small_config(steps=2, eval_size=5, **{"precision": "fp32", **change}), progress=False)


def test_unreadable_run_files_are_refused(tmp_path):
    run_dir = tmp_path / "run"
    train(run_dir, small_config(steps=1, eval_size=5, checkpoint_every=1), progress=False)
    (run_dir / "resume.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(TrainError, match="resume.pt: cannot resume"):
        train(run_dir, small_config(steps=2, eval_size=5), progress=False)
    (run_dir / "run.json").write_text("{")
    with pytest.raises(TrainError, match="run.json: not valid JSON"):
        train(run_dir, small_config(steps=2, eval_size=5), progress=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(TrainError, match="not a folder"):
        train(tmp_path / "file", small_config(steps=1), progress=False)


# ----- threads (training/threads.py) ----------------------------------------------------------------
TINY = dict(steps=2, batch_size=16, eval_size=5, eval_every=1, checkpoint_every=1, precision="fp32")


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fake_steps(clock: FakeClock, seconds: dict) -> dict:
    """Steps that cost ``seconds[threads]`` on the fake clock: the first call ``seconds[n][0]``, the rest
    ``seconds[n][1]``."""

    def step_for(n):
        calls = iter(range(10**6))

        def step():
            clock.now += seconds[n][0] if next(calls) == 0 else seconds[n][1]

        return step

    return {n: step_for(n) for n in seconds}


def test_thread_decision_keeps_one_thread_unless_more_gain_the_margin():
    assert decide({1: 6.2, 2: 0.61}) == (1, "measured 6.20 steps/s against 0.61 with 2")  # a loaded machine
    assert decide({1: 14.05, 2: 25.69}) == (2, "measured 25.69 steps/s against 14.05 with 1")  # native bf16
    chosen, reason = decide({1: 9.28, 2: 10.32})  # fp32 on an idle 2-core machine: 1.11x
    assert chosen == 1 and reason.endswith("under the 1.15x more threads must gain")
    assert decide({1: 10.0, 2: 11.6})[0] == 2 and decide({1: 10.0, 4: 30.0, 2: 20.0})[0] == 4


def test_thread_measurement_alternates_its_candidates_within_the_budget():
    clock, order = FakeClock(), []
    steps = fake_steps(clock, {1: (0.1, 0.02), 2: (0.1, 0.01)})  # warm-ups (not timed), then steps
    rates = measure(steps, clock=clock, set_threads=order.append)
    assert rates[1] == pytest.approx(50) and rates[2] == pytest.approx(100)
    assert order[:6] == [1, 2, 1, 2, 1, 2] and order.count(1) == order.count(2)
    assert BUDGET_S <= clock.now <= BUDGET_S + 0.03


def test_a_slow_first_step_is_its_candidates_timing_and_not_repeated():
    clock, order = FakeClock(), []
    steps = fake_steps(clock, {1: (0.05, 0.16), 2: (1.64, 1.64)})  # two threads on a loaded machine
    rates = measure(steps, clock=clock, set_threads=order.append)
    assert order.count(2) == 1 and rates[2] == pytest.approx(1 / 1.64)
    assert order.count(1) == 2 and rates[1] == pytest.approx(1 / 0.16)  # one timed step after the budget ran out
    assert 1.64 > COLD_LIMIT_S and decide(rates)[0] == 1


def test_a_measured_thread_choice_is_recorded_with_its_timings(tmp_path, monkeypatch):
    monkeypatch.setattr("assignadd.training.train.usable_cores", lambda: 2)  # measured even on a 1-core machine
    lines = []
    train(tmp_path / "run", small_config(**{**TINY, "steps": 1}), progress=False, log=lines.append)
    record = json.loads((tmp_path / "run" / "run.json").read_text())["threads"]
    assert record["source"] == "measured" and record["chosen"] in (1, 2) and record["cores"] == 2
    assert set(record["steps_per_s"]) == {"1", "2"} and all(r > 0 for r in record["steps_per_s"].values())
    assert record["batch_size"] == 16 and record["measure_s"] >= 0 and record["measured_on"]
    assert record["load_average"] is None or len(record["load_average"]) == 3
    assert lines[1] == f"{tmp_path / 'run'}: threads: {record['chosen']} ({record['reason']})"
    assert record["reason"].startswith("measured ")


def test_the_thread_choice_is_kept_when_the_run_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr("assignadd.training.train.usable_cores", lambda: 2)
    monkeypatch.setattr("assignadd.training.threads.measure", lambda steps, **kw: {1: 3.0, 2: 1.0})
    run_dir, lines, seen = tmp_path / "run", [], []
    train(run_dir, small_config(**TINY), progress=False, stop_after=1, log=lines.append)
    record = json.loads((run_dir / "run.json").read_text())["threads"]
    assert record["chosen"] == 1 and record["source"] == "measured" and record["steps_per_s"] == {"1": 3.0, "2": 1.0}
    assert lines[1] == f"{run_dir}: threads: 1 (measured 3.00 steps/s against 1.00 with 2)"
    monkeypatch.setattr("assignadd.training.train.choose_threads", lambda *a, **k: pytest.fail("measured again"))
    lines.clear()
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the caller's count, other than the run's (tests run on one thread)
    try:
        train(
            run_dir,
            small_config(**TINY),
            progress=False,
            log=lines.append,
            early_stop=lambda *a: seen.append(torch.get_num_threads()),
        )
        assert torch.get_num_threads() == 2  # restored when train returns
    finally:
        torch.set_num_threads(before)
    assert lines[1] == f"{run_dir}: threads: 1 (resumed: run.json records 1, chosen when the run started)"
    assert seen == [1]  # the resumed step trained on the recorded count
    assert json.loads((run_dir / "run.json").read_text())["threads"] == record  # written once


def test_given_threads_skip_the_measurement_and_show_in_the_progress_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("assignadd.training.train.choose_threads", lambda *a, **k: pytest.fail("measured"))
    run_dir = tmp_path / "run"
    args = ["--steps", "1", "--batch-size", "16", "--eval-size", "5", "--precision", "fp32", "--threads", "1"]
    assert train_main([str(run_dir), *args]) == 0
    err = capsys.readouterr().err
    assert f"{run_dir}: threads: 1 (given)\n" in err and "train seed=42 threads=1" in err
    record = json.loads((run_dir / "run.json").read_text())["threads"]
    assert record["chosen"] == 1 and record["source"] == "given" and record["steps_per_s"] == {}


def test_one_usable_core_is_not_measured(tmp_path, monkeypatch):
    monkeypatch.setattr("assignadd.training.train.usable_cores", lambda: 1)
    monkeypatch.setattr("assignadd.training.train.choose_threads", lambda *a, **k: pytest.fail("measured"))
    train(tmp_path / "run", small_config(**{**TINY, "steps": 1}), progress=False, log=None)
    record = json.loads((tmp_path / "run" / "run.json").read_text())["threads"]
    assert record["chosen"] == 1 and record["source"] == "one core"


def test_the_thread_count_does_not_change_the_bits(tmp_path):
    """A run's choice of threads is the machine's, not the run's: 1 and 2 threads train the same bits
    (``Embed`` uses F.embedding for this), so a resumed run may go on with other threads."""
    settings = dict(steps=3, batch_size=32, eval_size=5, eval_every=3, checkpoint_every=3, precision="fp32")
    one = train(tmp_path / "one", small_config(threads=1, **settings), progress=False, log=None)
    two = train(tmp_path / "two", small_config(threads=2, **settings), progress=False, log=None)
    assert bit_identical(state(one), state(two))


# ----- bad options -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        ({"steps": 0}, "--steps must be at least 1, got 0"),
        ({"lr": -1.0}, "--lr must be a positive number, got -1.0"),
        ({"lr": float("nan")}, "--lr must be a positive number"),
        ({"f": 2.0}, "--f must be in (0, 1], got 2.0"),
        ({"r": 1.5}, "--r must be in [0, 1], got 1.5"),
        ({"precision": "fp8"}, "--precision must be auto, fp32 or bf16, got fp8"),
        ({"device": "tpu"}, "--device must be cpu or cuda[:N], got 'tpu'"),
        ({"batch_size": 0}, "--batch-size must be at least 1"),
        ({"weight_decay": -0.1}, "--weight-decay must be >= 0"),
        ({"eval_size": 0}, "--eval-size must be at least 1"),
    ],
)
def test_bad_values_raise_train_error_before_touching_the_folder(tmp_path, change, message):
    with pytest.raises(TrainError) as info:
        train(tmp_path / "run", small_config(**change), progress=False)
    assert str(info.value) == message or str(info.value).startswith(message)
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_is_refused(tmp_path):
    with pytest.raises(TrainError, match="CUDA is not available"):
        train(tmp_path / "run", small_config(device="cuda"), progress=False)


def test_split_with_a_number_missing_from_training_is_refused(tmp_path):
    with pytest.raises(TrainError, match=r"f=0\.01 leaves numbers \[[0-9, ]+\](\.\.\.)? out of every training pair"):
        train(tmp_path / "run", small_config(f=0.01), progress=False)
    assert not (tmp_path / "run").exists()


# ----- the command line ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "0"], "error: --steps must be at least 1, got 0"),
        (["--lr", "-1"], "error: --lr must be a positive number, got -1.0"),
        (["--f", "2"], "error: --f must be in (0, 1], got 2.0"),
        (["--precision", "fp8"], "error: --precision must be auto, fp32 or bf16, got fp8"),
        (["--device", "tpu"], "error: --device must be cpu or cuda[:N], got 'tpu'"),
        (["--f", "0.01"], "error: f=0.01 leaves numbers"),
    ],
)
def test_cli_bad_value_exits_2_with_one_error_line(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        train_main([str(tmp_path / "run"), "--quiet", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args", [["--steps", "many"], ["--no-such-option"], []])
def test_cli_usage_errors_exit_2(tmp_path, capsys, args):
    argv = ([str(tmp_path / "run")] if args else []) + args
    with pytest.raises(SystemExit) as info:
        train_main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.endswith(" (see assignadd-train --help)\n") and err.count("\n") == 1


def test_cli_trains_a_tiny_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = train_main(
        [
            str(run_dir),
            "--steps",
            "2",
            "--batch-size",
            "16",
            "--eval-size",
            "5",
            "--quiet",
            "--checkpoint-every",
            "1",
            "--seed",
            "1",
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == f"final checkpoint: {run_dir / 'final.pt'}"
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt")) == [
        "step_000000.pt",
        "step_000001.pt",
        "step_000002.pt",
    ]
