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
