"""Model variants (SPEC §2.1, an extension beyond the paper): other layer and head counts, widths, MLP
layers, LayerNorm, modulus and number of variables train, save, load and verify; the paper's own
configuration is untouched by the option (state dict keys, forward bits, run.json).

Runs here are tiny (10 steps of batch 32, pools of 20, ``--n 50``): they test that every path works on
a variant, not that a variant learns.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from transformer_lens import patching

import assignadd
from assignadd import AssignAddTransformer, Task, load_checkpoint
from assignadd.model import ModelConfig, load_checkpoint_full
from assignadd.model.checkpoint import save_checkpoint
from assignadd.reports.verify_cli import main as verify_main
from assignadd.training.fast_forward import last_logits
from assignadd.training.train import TrainConfig, TrainError, train
from assignadd.training.train_cli import main as train_main

TINY = ["--steps", "10", "--batch-size", "32", "--eval-every", "5", "--checkpoint-every", "5", "--eval-size", "20"]
VARIANTS = {
    "two_heads": (
        ["--n-heads", "2", "--d-model", "32", "--d-mlp", "64"],
        ModelConfig(d_model=32, d_head=16, n_heads=2, d_mlp=64),
    ),
    "three_layers_layernorm_mlp_everywhere": (
        ["--n-layers", "3", "--layernorm", "--mlp-layers", "all", "--d-model", "32", "--d-head", "24", "--d-mlp", "48"],
        ModelConfig(d_model=32, d_head=24, d_mlp=48, n_layers=3, mlp_layers=(0, 1, 2), layernorm=True),
    ),
    "modulus_23_six_variables": (
        ["--modulus", "23", "--n-vars", "6", "--d-model", "32", "--n-heads", "2", "--d-head", "8"],
        ModelConfig(d_vocab=23 + 3 + 6, d_vocab_out=23, d_model=32, d_head=8, n_heads=2, d_mlp=128),
    ),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant_run(request, tmp_path_factory):
    """A variant trained with ``assignadd-train`` in-process: (run folder, the config it must have)."""
    flags, cfg = VARIANTS[request.param]
    run_dir = tmp_path_factory.mktemp(request.param) / "run"
    assert train_main([str(run_dir), *TINY, "--precision", "fp32", "--quiet", *flags]) == 0
    return run_dir, cfg


def test_a_variant_trains_and_loads_back_bit_exact_with_its_config_and_task(variant_run, tmp_path):
    run_dir, cfg = variant_run
    model, meta = load_checkpoint_full(run_dir / "final.pt")
    assert model.cfg == cfg
    header = json.loads((run_dir / "run.json").read_text())
    assert header["model_config"] == cfg.to_dict()
    assert (meta["task"]["modulus"], meta["task"]["n_vars"]) == (cfg.d_vocab_out, cfg.n_vars)
    assert header["task"] == meta["task"]
    # final.pt holds the weights resume.pt holds for the same last step, bit for bit.
    resume = torch.load(run_dir / "resume.pt", weights_only=True)
    assert resume["step"] == 10 and list(resume["state_dict"]) == list(model.state_dict())
    assert all(torch.equal(resume["state_dict"][k], v) for k, v in model.state_dict().items())
    # A save of the loaded model loads back the same, series format (zero frozen tensors dropped) included.
    for drop in (False, True):
        path = tmp_path / f"again_{drop}.pt"
        save_checkpoint(model, path, task=meta["task"], drop_zero_frozen=drop)
        again = load_checkpoint(path)
        assert again.cfg == cfg
        assert all(torch.equal(again.state_dict()[k], v) for k, v in model.state_dict().items())
    # The model learned something in 10 steps (its weights moved), and the step-0 checkpoint is its init.
    start = load_checkpoint(run_dir / "checkpoints" / "step_000000.pt")
    assert not torch.equal(start.embed.W_E, model.embed.W_E)
    assert torch.equal(start.embed.W_E, AssignAddTransformer(cfg, seed=42).embed.W_E)


@pytest.mark.slow
def test_verify_runs_every_claim_on_a_variant_and_reports_its_config(variant_run, tmp_path):
    run_dir, cfg = variant_run
    out = tmp_path / "report"
    code = verify_main([str(run_dir / "final.pt"), "--n", "50", "--quiet", "--out", str(out)])
    assert code in (0, 1)
    report = json.loads((out / "report.json").read_text())
    assert report["model_config"] == cfg.to_dict()
    assert report["task"]["modulus"] == cfg.d_vocab_out and report["task"]["n_vars"] == cfg.n_vars
    assert report["task_source"] == "checkpoint"
    verdicts = {c["claim"]: c["verdict"] for c in report["claims"]}
    assert len(verdicts) == 7 and set(verdicts.values()) <= {"pass", "fail", "inconclusive", "error"}
    for claim in report["claims"]:
        if claim["verdict"] == "error":  # a measurement the variant does not have: one line saying why
            assert claim["reason"] and "\n" not in claim["reason"] and "Traceback" not in claim["reason"]
    if (cfg.d_vocab_out, cfg.n_vars) != (59, 12):  # every claim reads the model's own vocabulary
        assert "error" not in verdicts.values(), {c["claim"]: c["reason"] for c in report["claims"]}


# ----- the forward paths on variants ------------------------------------------------------------------
LAYERNORM_VARIANTS = [
    ModelConfig(d_model=32, d_head=24, n_heads=2, d_mlp=48, n_layers=3, mlp_layers=(0, 1, 2), layernorm=True),
    ModelConfig(d_model=32, d_head=16, d_mlp=48, n_layers=3, mlp_layers=(), layernorm=True),
    ModelConfig(d_model=32, d_head=8, n_heads=4, d_mlp=48, n_layers=1, mlp_layers=(0,), layernorm=True),
    ModelConfig(d_model=32, d_head=16, n_heads=3, d_mlp=48, n_layers=4, mlp_layers=(0, 2)),
]


def randomised(cfg: ModelConfig, seed: int = 1) -> AssignAddTransformer:
    """A model of ``cfg`` with every parameter, biases and LayerNorm weights included, random: every
    term of every path counts."""
    model = AssignAddTransformer(cfg, seed=0).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return model


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to float32 rounding relative to the values' scale (other matrix shapes, other sum orders)."""
    return bool((a - b).abs().max() <= 1e-5 * max(1.0, b.abs().max().item()))


@pytest.fixture(scope="module")
def tokens():
    return Task().pool("2var_heldout_pair", 48, seed=3)[0]


@pytest.mark.parametrize("cfg", LAYERNORM_VARIANTS, ids=lambda c: f"L{c.n_layers}H{c.n_heads}ln{int(c.layernorm)}")
def test_last_position_shortcuts_equal_the_full_forward_values_and_gradients(cfg, tokens):
    model = randomised(cfg)
    full = model(tokens)[:, -1]
    assert close(model(tokens, last_only=True)[:, -1], full)
    # With a hook before the last block's MLP, the partly cut path; the hook fires.
    seen = []
    model.blocks[-1].hook_resid_mid.add_hook(lambda x, hook: seen.append(x.shape))
    assert close(model(tokens, last_only=True)[:, -1], full) and seen
    model.reset_hooks()
    # The training path: same logits and same gradients as the hooked forward.
    fast = last_logits(model, tokens)
    assert close(fast, full)
    labels = torch.arange(len(tokens)) % cfg.d_vocab_out
    grads = []
    for forward in (lambda: model(tokens)[:, -1], lambda: last_logits(model, tokens)):
        model.zero_grad()
        torch.nn.functional.cross_entropy(forward(), labels).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    assert all(close(grads[1][n], grads[0][n]) for n in grads[0])


def test_a_hook_on_ln_final_sees_every_position_under_last_only(tokens):
    model = randomised(LAYERNORM_VARIANTS[0])
    shapes = []
    model.ln_final.hook_scale.add_hook(lambda x, hook: shapes.append(tuple(x.shape)))
    out = model(tokens, last_only=True)
    model.reset_hooks()
    assert shapes == [(len(tokens), 16, 1)]
    assert torch.allclose(out[:, -1], model(tokens)[:, -1], atol=1e-5)


def test_layernorm_is_transformer_lens_ln_and_activation_cache_undoes_it(tokens):
    model = randomised(LAYERNORM_VARIANTS[0])
    assert model.cfg.normalization_type == "LN"
    logits, cache = model.run_with_cache(tokens)
    x = cache["blocks.2.hook_resid_post"]
    centred = x - x.mean(-1, keepdim=True)
    scale = (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
    assert torch.allclose(cache["ln_final.hook_scale"], scale, atol=1e-6)
    normalized = centred / scale * model.ln_final.w + model.ln_final.b
    assert torch.allclose(cache["ln_final.hook_normalized"], normalized, atol=1e-5)
    assert torch.allclose(logits, normalized @ model.unembed.W_U + model.unembed.b_U, atol=1e-4)
    # ActivationCache's apply_ln_to_stack centres each component and divides by the cached scale: the
    # components of the final residual stream, so normalised, add up to ln_final's input normalised.
    stack = cache.decompose_resid(layer=-1, return_labels=False)
    parts = cache.apply_ln_to_stack(stack, layer=-1)
    assert torch.allclose(parts.sum(0), centred / scale, atol=1e-4)
    # ln1 / ln2 scales sit where TransformerLens looks for them, with its shapes.
    for name in ("blocks.0.ln1.hook_scale", "blocks.1.ln2.hook_scale", "blocks.2.ln1.hook_normalized"):
        assert name in cache and cache[name].shape[:2] == tokens.shape


def test_per_head_inputs_are_the_pre_ln1_stream_and_direct_path_patching_runs(tokens):
    model = randomised(LAYERNORM_VARIANTS[0])
    clean = model(tokens)
    model.set_use_split_qkv_input(True)
    seen = []
    model.blocks[1].attn.hook_q_input.add_hook(lambda x, hook: seen.append(x))
    split, cache = model.run_with_cache(tokens)
    model.reset_hooks()
    model.set_use_split_qkv_input(False)
    assert torch.allclose(split, clean, atol=1e-5)
    assert torch.equal(seen[0][:, :, 0], cache["blocks.1.hook_resid_pre"])  # before ln1, as TransformerLens
    corrupted = Task().pool("2var_heldout_pair", 48, seed=4)[0]
    _, clean_cache = model.run_with_cache(tokens)
    _, corrupted_cache = model.run_with_cache(corrupted)
    result = patching.get_act_patch_direct_path(
        model,
        corrupted,
        clean_cache,
        corrupted_cache,
        lambda logits: logits[:, -1].sum(),
        src_layer=0,
        src_head=1,
        verbose=False,
    )
    assert result.shape == (3, 2) and torch.isfinite(result).all() and result[1:].abs().sum() > 0


def test_a_bare_transformer_lens_state_dict_of_a_layernorm_variant_loads_with_its_config(tmp_path, tokens):
    model = randomised(LAYERNORM_VARIANTS[0])
    path = tmp_path / "bare.pt"
    torch.save(model.state_dict(), path)
    loaded = load_checkpoint(path)
    assert loaded.cfg == model.cfg
    assert torch.equal(loaded(tokens), model(tokens))


# ----- the paper's configuration is untouched -----------------------------------------------------------
# The bundled reference's logits on a fixed batch, as the code before LayerNorm and variants existed
# computed them (sha256 of the float32 bytes; same torch build and CPU kind as the golden report numbers).
REFERENCE_FULL_SHA256 = "607b0166128b0fa41efde205f7837c81685dbf700fb64aa53cbf003bfb9cf950"
REFERENCE_LAST_ONLY_SHA256 = "7927b26d4227c2d280095d75f2541c381431cb00004351900e4636027706ff9d"


def test_the_paper_config_builds_the_same_keys_and_forward_bits():
    model = load_checkpoint(assignadd.reference_checkpoint())
    assert model.cfg == ModelConfig() and model.ln_final is None and model.cfg.normalization_type is None
    assert "layernorm" not in model.cfg.to_dict()
    assert not any(".ln" in k or k.startswith("ln_final") for k in model.state_dict())
    tokens, _ = Task().pool("2var_heldout_pair", 64, seed=0)
    with torch.no_grad():
        full, last = model(tokens), model(tokens, last_only=True)
    assert hashlib.sha256(full.numpy().tobytes()).hexdigest() == REFERENCE_FULL_SHA256
    assert hashlib.sha256(last.numpy().tobytes()).hexdigest() == REFERENCE_LAST_ONLY_SHA256


def test_the_default_train_config_is_the_paper_model_and_task():
    cfg = TrainConfig(precision="fp32")
    task = cfg.task()
    assert task.config == Task().config
    assert cfg.model_config(task) == ModelConfig()
    # run.json's "train" keeps its keys: the architecture and the task's shape are in model_config and task.
    assert list(cfg.identity()) == ["seed", "f", "r", "split_seed", "batch_size", "lr", "weight_decay", "betas", "bf16"]


# ----- bad options, resumes ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--n-heads", "0"], "--n-heads must be a positive integer, got 0"),
        (["--d-model", "0"], "--d-model must be a positive integer, got 0"),
        (["--d-head", "-1"], "--d-head must be a positive integer, got -1"),
        (["--n-layers", "0"], "--n-layers must be a positive integer, got 0"),
        (["--mlp-layers", "2"], "--mlp-layers: 2 is not a layer index 0..1"),
        (["--mlp-layers", "0,0"], "--mlp-layers lists a layer twice"),
        (["--modulus", "1"], "--modulus must be an integer of at least 2, got 1"),
        (["--n-vars", "27"], "--n-vars must be in 3..26"),
        (["--n-vars", "2"], "2 leaves no variable pair to train on"),
        (["--d-model", "2", "--n-heads", "4"], "leaves no width per head"),
    ],
)
def test_bad_architecture_options_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, flags, message):
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        train_main([str(run_dir), "--steps", "1", "--quiet", *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not run_dir.exists()


@pytest.mark.parametrize("text, layers", [("all", (0, 1, 2)), ("none", ()), ("0,2", (0, 2)), ("1", (1,))])
def test_mlp_layers_option_reaches_the_model(tmp_path, text, layers):
    run_dir = tmp_path / "run"
    flags = ["--n-layers", "3", "--mlp-layers", text, "--d-model", "16", "--d-mlp", "16"]
    assert train_main([str(run_dir), "--steps", "1", "--batch-size", "8", "--eval-size", "5", "--quiet", *flags]) == 0
    model = load_checkpoint(run_dir / "final.pt")
    assert model.cfg.mlp_layers == layers
    assert [b.has_mlp for b in model.blocks] == [i in layers for i in range(3)]


def test_resuming_with_another_architecture_is_refused(tmp_path):
    settings = dict(steps=4, batch_size=8, eval_size=5, eval_every=2, checkpoint_every=2, d_model=16, precision="fp32")
    run_dir = tmp_path / "run"
    train(run_dir, TrainConfig(**settings), progress=False, stop_after=2, log=None)
    for other in (dict(n_heads=2), dict(layernorm=True), dict(n_vars=6)):
        with pytest.raises(TrainError, match="holds a run with other settings"):
            train(run_dir, TrainConfig(**{**settings, **other}), progress=False, log=None)
    # The same flags resume it.
    final = train(run_dir, TrainConfig(**settings), progress=False, log=None)
    assert load_checkpoint_full(final)[1]["step"] == 4


def test_model_config_refuses_shapes_that_build_no_model():
    for bad in (dict(n_heads=0), dict(d_model=-1), dict(mlp_layers=(2,)), dict(n_layers=0), dict(layernorm=1)):
        with pytest.raises(ValueError):
            ModelConfig(**bad)
