"""Sweeps (SPEC §1.3, §4.5): the sweep folder, resumption, early stopping, the
``data_requirements`` claim and the sweep report.

Training runs here are tiny (a few steps of batch 16, pools of 20): they test bookkeeping and equality
of arithmetic, not learning. The claim is tested on synthetic sweep folders whose per-point metric
files (``generalization.json``) are written by hand, so the answer is known by construction.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from assignadd.hypotheses import REGISTRY
from assignadd.hypotheses import data_requirements as dr
from assignadd.reports import sweep_report
from assignadd.training.grid import EARLY_STOP_BAR, EarlyStop, SweepConfig, early_stop_metric
from assignadd.training.sweep import open_sweep, run_sweep
from assignadd.training.sweep_cli import main as sweep_main
from assignadd.training.sweep_folder import GRID_FORMAT, point_status, points_dir
from assignadd.training.train import train

TINY = dict(steps=4, batch_size=16, eval_size=20, eval_every=2, checkpoint_every=2)


def tiny_config(**overrides) -> SweepConfig:
    return SweepConfig(**{"param": "f", "values": (0.5, 0.7), "seeds": (0,), **TINY, **overrides})


def run_cli(argv, capsys):
    """``assignadd-sweep argv`` -> (exit code, stdout, stderr)."""
    try:
        code = sweep_main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


# ----- grid parsing and bad flags --------------------------------------------------------------------
def test_grid_lists_every_value_and_seed_in_order():
    cfg = SweepConfig(param="r", values=(0.3, 0.05, 1.0), seeds=(1, 0))
    names = [p.name for p in cfg.points()]
    assert names == ["r=0.05_seed=1", "r=0.05_seed=0", "r=0.3_seed=1", "r=0.3_seed=0", "r=1_seed=1", "r=1_seed=0"]
    assert all(p.f == 0.7 for p in cfg.points())  # the paper's f when r is swept


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--param", "x", "--values", "0.5", "--out", "{out}"], "--param"),
        (["--param", "f", "--values", "0.5,abc", "--out", "{out}"], "comma-separated numbers"),
        (["--param", "f", "--values", "0.5", "--seeds", "0,x", "--out", "{out}"], "integers"),
        (["--param", "f", "--values", "0.5"], "--out"),
        (["--param", "f", "--values", "0.5,0.5", "--out", "{out}"], "twice"),
        (["--param", "f", "--values", "1.5", "--out", "{out}"], "outside"),
        (["--param", "f", "--values", "0.5", "--f", "0.3", "--out", "{out}"], "swept parameter"),
        (["--param", "f", "--values", "0.5", "--ray-address", "x:1", "--out", "{out}"], "--backend ray"),
        (["--param", "f", "--values", "0.5", "--steps", "0", "--out", "{out}"], "--steps"),
        (["--param", "f", "--values", "0.5", "--early-stop", "-1", "--out", "{out}"], "--early-stop"),
    ],
)
def test_bad_flags_exit_2_with_one_error_line_and_write_nothing(tmp_path, capsys, argv, says):
    out = tmp_path / "sweep"
    code, stdout, err = run_cli([a.replace("{out}", str(out)) for a in argv], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]
    assert not out.exists()


def test_split_that_leaves_a_number_out_of_training_is_refused(tmp_path, capsys):
    code, _, err = run_cli(["--param", "f", "--values", "0.02,0.5", "--out", str(tmp_path / "s")], capsys)
    assert code == 2 and "f=0.02" in err and "no model could learn" in err
    code, _, err = run_cli(["--param", "r", "--values", "0.5", "--f", "0.02", "--out", str(tmp_path / "s")], capsys)
    assert code == 2 and "f=0.02" in err
    assert not (tmp_path / "s").exists()


# ----- early stopping --------------------------------------------------------------------------------
def accs(value: float, **pools) -> dict:
    names = ("0var_heldout_pair", "2var_heldout_pair", "2var_restricted_1", "2var_restricted_2")
    return {**{n: value for n in names}, **pools}


def test_early_stop_triggers_after_k_consecutive_evaluations_at_the_bar():
    stop = EarlyStop("f", patience=3)
    seq = [0.5, EARLY_STOP_BAR, 0.99, 0.2, 0.98, 0.97, 1.0]  # the streak breaks at 0.2, then three in a row
    fired = [stop(100 * (i + 1), accs(v)) for i, v in enumerate(seq)]
    assert fired == [False, False, False, False, False, False, True]


def test_early_stop_metric_for_r_is_the_mean_of_the_2var_union_pools():
    a = accs(1.0, **{"2var_restricted_2": 0.9, "0var_heldout_pair": 0.0})
    assert early_stop_metric("r", a) == pytest.approx((1.0 + 1.0 + 0.9) / 3)
    assert early_stop_metric("f", a) == 0.0
    assert not EarlyStop("r", patience=1)(100, a)  # the bar is 0.97; the mean is 0.967


def test_early_stop_counts_the_streak_logged_before_a_resume(tmp_path):
    lines = [{"step": s, "accuracy": accs(v)} for s, v in ((0, 0.0), (100, 0.99), (200, 0.99), (300, 0.1))]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    resumed = EarlyStop("f", patience=3, run_dir=tmp_path)
    assert resumed(300, accs(0.99))  # steps 100 and 200 were at the bar; the line for 300 is being replaced


# ----- a tiny sweep ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """A 2-point sweep whose first point was killed at step 2 before the sweep ran."""
    out = tmp_path_factory.mktemp("sweep") / "f"
    cfg = tiny_config()
    open_sweep(out, cfg)
    first = cfg.points()[0]
    decided = replace(cfg, precision=json.loads((out / "sweep.json").read_text())["precision"]["chosen"])
    train(points_dir(out) / first.name, decided.train_config(first), progress=False, stop_after=2)
    partial = point_status(points_dir(out) / first.name)
    summary = run_sweep(out, cfg, progress=False)
    return out, cfg, partial, summary


def test_tiny_sweep_makes_an_ordinary_run_folder_per_point(tiny_sweep):
    out, cfg, _, _ = tiny_sweep
    grid = json.loads((out / "sweep.json").read_text())
    assert grid["format"] == "assignadd.sweep-grid/1" and grid["grid"]["values"] == [0.5, 0.7]
    assert [p["name"] for p in grid["points"]] == ["f=0.5_seed=0", "f=0.7_seed=0"]
    for p in cfg.points():
        d = points_dir(out) / p.name
        run = json.loads((d / "run.json").read_text())
        assert run["task"]["f"] == p.f and run["train"]["seed"] == 0
        assert [json.loads(x)["step"] for x in (d / "metrics.jsonl").read_text().splitlines()] == [0, 2, 4]
        assert (d / "final.pt").exists() and (d / "checkpoints" / "step_000004.pt").exists()


def test_killed_point_resumes_and_finished_points_are_skipped(tiny_sweep, capsys):
    out, cfg, partial, summary = tiny_sweep
    assert partial == ("partial", 2)
    assert [s["status"] for s in summary] == ["trained (full length)", "trained (full length)"]
    finals = {p.name: (points_dir(out) / p.name / "final.pt").stat().st_mtime_ns for p in cfg.points()}
    argv = [
        "--param",
        "f",
        "--values",
        "0.7,0.5",
        "--steps",
        "4",
        "--batch-size",
        "16",
        "--eval-size",
        "20",
        "--eval-every",
        "2",
        "--checkpoint-every",
        "2",
        "--out",
        str(out),
    ]
    code, stdout, _ = run_cli(argv, capsys)
    assert code == 0 and stdout.count("skipped (finished)") == 2
    assert finals == {p.name: (points_dir(out) / p.name / "final.pt").stat().st_mtime_ns for p in cfg.points()}


def test_existing_sweep_with_another_grid_is_refused(tiny_sweep, capsys):
    out, *_ = tiny_sweep
    before = (out / "sweep.json").read_text()
    argv = [
        "--param",
        "f",
        "--values",
        "0.5,0.7",
        "--steps",
        "8",
        "--batch-size",
        "16",
        "--eval-size",
        "20",
        "--eval-every",
        "2",
        "--checkpoint-every",
        "2",
        "--out",
        str(out),
    ]
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and "another grid (steps: 4 there, 8 asked)" in err
    assert (out / "sweep.json").read_text() == before


def test_point_metric_is_computed_from_final_pt_and_cached_beside_it(tiny_sweep, monkeypatch):
    out, cfg, _, _ = tiny_sweep
    d = points_dir(out) / "f=0.5_seed=0"
    got = dr.point_metric(d, "f")
    assert got["n"] == 3481 - int(0.5 * 3481) and got["ci"] == [got["accuracy"]] * 2  # every held-out pair, exact
    assert json.loads((d / dr.CACHE_NAME).read_text())["accuracy"] == got["accuracy"]
    monkeypatch.setattr(dr, "generalization_accuracy", lambda *a, **k: pytest.fail("recomputed a cached metric"))
    assert dr.point_metric(d, "f") == got


def test_r_metric_scores_a_fixed_subsample_of_the_2var_union():
    from assignadd import AssignAddTransformer
    from assignadd.data import Task

    model, task = AssignAddTransformer(seed=0).eval(), Task(0.7, 0.5)
    a = dr.generalization_accuracy(model, task, "r", union_sample=300)
    b = dr.generalization_accuracy(model, task, "r", union_sample=300)
    assert a.n == 300 and a.extra["sample"] == 300 and a.low < a.value < a.high and a.to_dict() == b.to_dict()


# ----- the data_requirements claim --------------------------------------------------------------------
def synthetic_sweep(root, param: str, values, passing_from: float | None, seeds=(0,)):
    """A sweep folder with no weights, only each point's metric file: accuracy 0.99 at and above
    ``passing_from`` (None: nowhere), 0.05 below."""
    out = root / f"sweep_{param}"
    cfg = SweepConfig(param=param, values=tuple(values), seeds=seeds, steps=100, precision="fp32")  # decided
    points_dir(out).mkdir(parents=True)  # sweep.json as open_sweep writes it, without building each split
    (out / "sweep.json").write_text(json.dumps({"format": GRID_FORMAT, "grid": cfg.grid(), "options": {}}))
    sample = dr.UNION_SAMPLE if param == "r" else None
    for p in cfg.points():
        acc = 0.99 if passing_from is not None and p.value >= passing_from else 0.05
        d = points_dir(out) / p.name
        d.mkdir(parents=True)
        (d / dr.CACHE_NAME).write_text(
            json.dumps(
                {
                    "schema": dr.CACHE_SCHEMA,
                    "metric": dr.METRICS[param],
                    "requested_sample": sample,
                    "final_sha256": None,
                    "accuracy": acc,
                    "ci": [acc - 0.005, acc + 0.005],
                    "n": 1000,
                    "sample": sample,
                }
            )
        )
    return out


F_GRID = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7)
R_GRID = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


def test_data_requirements_is_kept_out_of_the_per_checkpoint_registry():
    assert "data_requirements" not in REGISTRY and "data_requirements" in dr.SWEEP_REGISTRY


def test_data_requirements_passes_on_sweeps_with_thresholds_inside_the_band(tmp_path):
    f_dir = synthetic_sweep(tmp_path, "f", F_GRID, 0.25, seeds=(0, 1))
    r_dir = synthetic_sweep(tmp_path, "r", R_GRID, 0.2)
    result = dr.DataRequirements().run_sweep([f_dir, r_dir])
    assert result.verdict == "pass", result.reason
    theta = {e.name: e.measurement for e in result.evidence}
    assert theta["f_threshold_not_below_band"].value == 0.25 and theta["r_threshold_not_above_band"].value == 0.2


@pytest.mark.parametrize(
    "passing_from, fails",
    [
        (None, "f_threshold_not_above_band"),  # nothing generalizes: the threshold is above 0.7, far above the band
        (0.1, "f_threshold_not_below_band"),  # everything generalizes, from the grid's smallest value (below the band)
        (0.7, "f_threshold_not_above_band"),  # a threshold far above the paper's
    ],
)
def test_data_requirements_fails_without_a_threshold_in_the_band(tmp_path, passing_from, fails):
    """One half only, and that half fails: the claim fails whatever the other half would show."""
    result = dr.DataRequirements().run_sweep(synthetic_sweep(tmp_path, "f", F_GRID, passing_from))
    assert result.verdict == "fail" and fails in result.reason


def test_half_a_claim_is_an_error_that_names_the_command_for_the_other_half(tmp_path):
    result = dr.DataRequirements().run_sweep(synthetic_sweep(tmp_path, "f", F_GRID, 0.25))
    assert result.verdict == "error", result.reason
    assert "half a claim is not a pass" in result.reason and "no r sweep" in result.reason
    assert dr.sweep_command("r") in result.reason and "assignadd-sweep --param r" in result.reason
    assert [e.name for e in result.evidence] == [
        "f_threshold_not_below_band",
        "f_threshold_not_above_band",
        "f_generalization_is_monotone",
    ]  # the half given is still shown


def test_a_threshold_far_above_the_papers_fails(tmp_path):
    """f = 0.4 (60% more data than the paper's 0.25) and r = 0.3: version 1's band (f 0.15-0.40) passed it."""
    f_dir = synthetic_sweep(tmp_path, "f", F_GRID, 0.4)
    r_dir = synthetic_sweep(tmp_path, "r", R_GRID, 0.3)
    result = dr.DataRequirements().run_sweep([f_dir, r_dir])
    assert result.verdict == "fail" and "f_threshold_not_above_band" in result.reason, result.reason


def test_data_requirements_answers_error_on_unfinished_points(tmp_path):
    out = synthetic_sweep(tmp_path, "f", F_GRID, 0.25)
    (points_dir(out) / "f=0.4_seed=0" / dr.CACHE_NAME).unlink()
    result = dr.DataRequirements().run_sweep(out)
    assert result.verdict == "error" and "f=0.4_seed=0" in result.reason


# ----- the sweep report ------------------------------------------------------------------------------
def test_sweep_report_writes_json_csv_and_html_with_the_threshold(tmp_path, capsys):
    synthetic_sweep(tmp_path / "both", "f", F_GRID, 0.25)
    synthetic_sweep(tmp_path / "both", "r", R_GRID, 0.2)
    assert sweep_report.is_sweep_folder(tmp_path / "both")
    assert sweep_report.main_for_sweep(tmp_path / "both", tmp_path / "rep", quiet=True) == 0  # exit 0: it passes
    doc = json.loads((tmp_path / "rep" / "sweep.json").read_text())
    assert doc["schema"] == "assignadd.sweep/1" and doc["claim"]["verdict"] == "pass"
    assert {s["param"]: s["threshold"]["median"] for s in doc["sweeps"]} == {"f": 0.25, "r": 0.2}
    csv_lines = (tmp_path / "rep" / "sweep.csv").read_text().splitlines()
    assert csv_lines[0].startswith("param,point,value") and len(csv_lines) == 1 + len(F_GRID) + len(R_GRID)
    page = (tmp_path / "rep" / "sweep.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "http" not in page.replace("http-equiv", "")
    for param in ("f", "r"):  # the same figures as files, for documents
        png = (tmp_path / "rep" / f"sweep_{param}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and base64.b64encode(png).decode() in page
    first = (tmp_path / "rep" / "sweep.json").read_bytes()
    sweep_report.main_for_sweep(tmp_path / "both", tmp_path / "rep", quiet=True)
    assert (tmp_path / "rep" / "sweep.json").read_bytes() == first


def test_sweep_report_records_the_hash_of_each_finished_points_weights(tmp_path):
    """What re-scores a verdict: each point's metric with the SHA-256 of the final.pt it was measured on."""
    import hashlib

    out = synthetic_sweep(tmp_path, "f", F_GRID, 0.25)
    doc = sweep_report.compute_sweep_report(out)
    assert all(p["final_sha256"] is None for p in doc["sweeps"][0]["points"])  # no weights, no hash
    weights = b"not a real checkpoint, only bytes to hash"
    finished = points_dir(out) / "f=0.25_seed=0"
    (finished / "final.pt").write_bytes(weights)
    summary = sweep_report._training_summary(finished, steps=100)
    assert summary["finished"] and summary["final_sha256"] == hashlib.sha256(weights).hexdigest()
    doc["sweeps"][0]["points"][0].update(summary)
    header, row = sweep_report.to_csv(doc).splitlines()[:2]
    assert dict(zip(header.split(","), row.split(",")))["final_sha256"] == hashlib.sha256(weights).hexdigest()


def test_sweep_report_gives_each_points_training_cost_with_resumed_segments_summed(tmp_path):
    """The run's cost: a resumed point restarts its clock, so the segments' wall times add up."""
    point = tmp_path / "f=0.3_seed=0"
    point.mkdir()
    rows = [(100, 10.0), (200, 20.0), (100, 4.0), (200, 14.0), (300, 25.5)]  # killed at 200, resumed from 0
    (point / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 1.0, "accuracy": {}, "wall_s": w}) + "\n" for s, w in rows)
    )
    assert sweep_report._training_summary(point, steps=300)["train_wall_s"] == 45.5
    (point / "metrics.jsonl").write_text(json.dumps({"step": 100, "loss": 1.0, "accuracy": {}}) + "\n")
    assert sweep_report._training_summary(point, steps=300)["train_wall_s"] is None  # no clock logged


def test_sweep_report_exits_1_when_the_claim_does_not_pass_and_still_writes_why(tmp_path):
    synthetic_sweep(tmp_path / "both", "f", F_GRID, 0.4)
    synthetic_sweep(tmp_path / "both", "r", R_GRID, 0.2)
    assert sweep_report.main_for_sweep(tmp_path / "both", tmp_path / "rep", quiet=True) == 1
    doc = json.loads((tmp_path / "rep" / "sweep.json").read_text())
    assert doc["claim"]["verdict"] == "fail" and doc["rule"]["band"] == {"f": [0.2, 0.3], "r": [0.15, 0.25]}
    page = (tmp_path / "rep" / "sweep.html").read_text()
    assert "f_threshold_not_above_band" in page and "<b>fail</b>" in page
    from assignadd.reports.report_cli import main as report_main

    assert report_main([str(tmp_path / "both"), "--out", str(tmp_path / "rep2"), "--quiet"]) == 1
    assert report_main([str(tmp_path / "both" / "sweep_f"), "--out", str(tmp_path / "rep3"), "--quiet"]) == 1  # half


def test_sweep_report_refuses_a_folder_that_is_not_a_sweep(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        sweep_report.main_for_sweep(tmp_path, tmp_path / "rep")
    assert e.value.code == 2 and "not a sweep folder" in capsys.readouterr().err
    assert not (tmp_path / "rep").exists()


# ----- Ray ---------------------------------------------------------------------------------------------
def test_ray_backend_trains_points_into_the_same_folder_layout(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'assignadd[ray]')")
    if not hasattr(ray, "init"):  # e.g. Ray's own /tmp/ray folder found as a namespace package
        pytest.skip(f"'ray' on sys.path is not the Ray package ({getattr(ray, '__path__', '?')})")
    out = tmp_path / "ray_sweep"
    cfg = SweepConfig(
        param="r", values=(0.5,), seeds=(0,), steps=2, batch_size=16, eval_size=20, eval_every=1, checkpoint_every=1
    )
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        summary = run_sweep(out, cfg, backend="ray", jobs=2, progress=False)
    finally:
        ray.shutdown()
    assert [s["status"] for s in summary] == ["trained (full length)"]
    d = points_dir(out) / "r=0.5_seed=0"
    assert (d / "final.pt").exists() and json.loads((d / "run.json").read_text())["task"]["r"] == 0.5


def test_an_unreachable_ray_address_is_one_clear_error_within_seconds():
    """Ray itself waits minutes for a cluster that is not there; the sweep asks the port first."""
    import socket

    from assignadd.training.grid import SweepError
    from assignadd.training.sweep import _check_reachable

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SweepError, match="no Ray cluster answers"):
        _check_reachable(f"127.0.0.1:{port}", timeout=2.0)
    with pytest.raises(SweepError, match="HOST:PORT"):
        _check_reachable("nonsense")
    with socket.socket() as listening:  # a listening port passes the check
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        _check_reachable(f"127.0.0.1:{listening.getsockname()[1]}")
    _check_reachable("auto")  # left to Ray
    _check_reachable(None)
