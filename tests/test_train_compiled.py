"""``assignadd-train --compile``: the step through torch.compile is a run of its own (recorded,
refused on resume in the other mode), bit-reproducible across a resume and across thread counts, and
learns what the eager step learns up to float rounding. Tiny runs, as in test_train.py; the first
compile on a machine takes up to a minute (Inductor caches it for the runs after)."""

from __future__ import annotations

import json

import pytest
import torch

from assignadd.model import load_checkpoint_full
from assignadd.training.compiled import compiler
from assignadd.training.train import TrainError, train
from assignadd.training.train_cli import main as train_main

from .test_train import bit_identical, metric_lines, small_config, state

pytestmark = pytest.mark.skipif(compiler() is None, reason="torch.compile needs a C++ compiler")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One compiled run uninterrupted on one thread; one killed after 15 steps and resumed, on two
    threads; one eager run of the same settings."""
    threads = torch.get_num_threads()
    root = tmp_path_factory.mktemp("compiled")
    cfg = dict(precision="fp32", compile=True)
    try:
        whole = train(root / "whole", small_config(threads=1, **cfg), progress=False, log=None)
        assert train(
            root / "resumed", small_config(threads=2, **cfg), progress=False, stop_after=15, log=None
        ).name == ("resume.pt")
        resumed = train(root / "resumed", small_config(threads=2, **cfg), progress=False, log=None)
        eager = train(root / "eager", small_config(threads=1, precision="fp32"), progress=False, log=None)
    finally:
        torch.set_num_threads(threads)
    return {"whole": whole, "resumed": resumed, "eager": eager}


def test_a_compiled_run_is_bit_identical_after_a_resume_on_other_threads(runs):
    assert bit_identical(state(runs["whole"]), state(runs["resumed"]))
    assert metric_lines(runs["whole"].parent) == metric_lines(runs["resumed"].parent)
    assert not torch.are_deterministic_algorithms_enabled()  # restored after the run


def test_compiled_arithmetic_is_recorded_and_learns_what_the_eager_step_learns(runs):
    whole, eager = runs["whole"].parent, runs["eager"].parent
    assert json.loads((whole / "run.json").read_text())["train"]["compile"] is True
    assert "compile" not in json.loads((eager / "run.json").read_text())["train"]  # older run folders still match
    assert load_checkpoint_full(runs["whole"])[1]["run"] == {"seed": 3, "bf16": False, "compiled": True}
    assert load_checkpoint_full(runs["eager"])[1]["run"] == {"seed": 3, "bf16": False}
    a, b = state(runs["whole"]), state(runs["eager"])
    assert not bit_identical(a, b)  # fused kernels sum in another order...
    for k in a:  # ...by float rounding, not by what was learned: within 1% of each weight's scale after
        # 30 AdamW steps (0.15% measured: AdamW's early steps magnify rounding in small gradients)
        if not (a[k].dtype.is_floating_point and a[k].isfinite().all()):
            assert torch.equal(a[k], b[k]), k  # the causal mask and its fill value
        else:
            assert (a[k] - b[k]).abs().max() <= 1e-2 * b[k].abs().max(), k
    losses = [(x["loss"], y["loss"]) for x, y in zip(metric_lines(whole), metric_lines(eager)) if x["loss"] is not None]
    assert losses and all(abs(x - y) < 1e-4 for x, y in losses)


def test_resuming_in_the_other_mode_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    train(run_dir, small_config(steps=1, eval_size=5, precision="fp32"), progress=False, log=None)
    with pytest.raises(TrainError, match="holds a run with other settings"):
        train(run_dir, small_config(steps=2, eval_size=5, precision="fp32", compile=True), progress=False, log=None)


def test_no_compiler_is_one_line_and_exit_2_before_the_folder_exists(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(SystemExit) as info:
        train_main([str(tmp_path / "run"), "--quiet", "--compile", "--steps", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --compile needs a C++ compiler") and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_a_compiler_that_fails_is_one_line_and_leaves_no_folder_behind(tmp_path, capsys, monkeypatch):
    from assignadd.training import compiled

    def broken(model, opt, **kwargs):
        def step(tokens, labels):
            raise RuntimeError("C++ compile error\nfatal error: Python.h: No such file or directory")

        return step

    monkeypatch.setattr(compiled, "compile_step", broken)
    with pytest.raises(SystemExit) as info:
        train_main([str(tmp_path / "run"), "--quiet", "--compile", "--steps", "2", "--precision", "fp32"])
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        "error: --compile: torch.compile failed on this machine (RuntimeError: C++ compile error); "
        "train without --compile"
    )
    assert not (tmp_path / "run").exists()  # made by this call, nothing trained in it: removed
    assert not torch.are_deterministic_algorithms_enabled()


def test_every_compiled_run_in_a_process_is_compiled(monkeypatch):
    """Dynamo keeps at most ``recompile_limit`` versions per code object; each run's step shares its code
    objects with the runs before, so without a fresh cache a later run would run eager unannounced.
    (The limit is set to 1 here so that two runs show what the ninth would.)"""
    import torch._dynamo.config as dynamo_config
    from torch._dynamo.utils import counters

    from assignadd.data import Task
    from assignadd.model import AssignAddTransformer
    from assignadd.training.compiled import compile_step, compiled_mode

    monkeypatch.setattr(dynamo_config, "recompile_limit", 1)
    tokens, labels = Task().training_batch(0, 0, 16)
    for seed in (0, 1):
        model = AssignAddTransformer(seed=seed)
        opt = torch.optim.AdamW(model.trainable_parameters, lr=1e-3)
        with compiled_mode():
            step = compile_step(model, opt, device="cpu", bf16=False, biases=False)
            before = counters["frames"]["ok"]
            step(tokens, labels)
        assert counters["frames"]["ok"] - before >= 2, seed  # the loss and AdamW's step, both compiled
