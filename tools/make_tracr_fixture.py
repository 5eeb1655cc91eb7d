"""Build tests/fixtures/tracr_prev_token.npz (+ .json): a transformer whose circuit a compiler wrote.

The intuition: every other model assignadd's claims are tested on was trained (or planted) by this
package, so what its heads do is itself a finding. A model compiled by tracr from a RASP program has a
circuit known by construction: the compiler says which head implements which ``Aggregate``. This
script compiles

    prev  = Aggregate(Select(indices, indices, q == k + 1), tokens)   # the token at t-1: a previous-token head
    first = Aggregate(Select(indices, indices, k == 0), tokens)       # the first token: a second, other head
    out   = SequenceMap(lambda x, y: x, prev, first)                  # an MLP that passes ``prev`` through

(categorical, vocabulary {a, b, c, d}, max_seq_len 8, causal, BOS "BOS"). tracr puts both aggregates in
layer 0 as two heads and the SequenceMap in layer 0's MLP, so the output at every position t >= 2 is the
token at t-1, computed by one head, while the other head reads something else: a compiled positive and a
compiled negative in one model.

It then converts tracr's haiku parameters to TransformerLens' layout (the state-dict names of
``assignadd.model.AssignAddTransformer``), checks the conversion with a NumPy forward against tracr's own
forward on every sequence of the maximum length (the model is causal, so that covers every shorter
input as a prefix), checks tracr against the RASP program, and writes the weights, the config, the
encodings, which head is which, and tracr's outputs on a fixed sample of inputs.

Run (outside the package's install; needs JAX and tracr, not torch nor assignadd):

    python3 -m venv tracr-venv
    tracr-venv/bin/pip install tracr-pypi "jax[cpu]" dm-haiku numpy
    tracr-venv/bin/python tools/make_tracr_fixture.py

Made with tracr-pypi 1.0.0, jax 0.10.2, jaxlib 0.10.2, dm-haiku 0.0.17, numpy 2.4.6, Python 3.11.7.
"""

from __future__ import annotations

import itertools
import json
import platform
from importlib.metadata import version
from pathlib import Path

import numpy as np
from tracr.compiler import compiling
from tracr.rasp import rasp

VOCAB = ("a", "b", "c", "d")
MAX_SEQ_LEN = 8
BOS = "BOS"
N_SAMPLE = 256  # saved input sequences (of the maximum length) with tracr's outputs
OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tracr_prev_token"
COMMAND = "tracr-venv/bin/python tools/make_tracr_fixture.py"


def program():
    """The RASP program and the labels of its two aggregates."""
    prev = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, lambda k, q: q == k + 1), rasp.tokens)
    first = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == 0), rasp.tokens)
    prev, first = rasp.categorical(prev).named("prev"), rasp.categorical(first).named("first")
    out = rasp.categorical(rasp.SequenceMap(lambda x, y: x, prev, first)).named("out")
    return out, prev.label, first.label


def convert(model, out_label: str) -> tuple[dict[str, np.ndarray], dict]:
    """tracr's haiku params -> {TransformerLens state-dict name: array}, and the config.

    haiku's attention weights are (d_model, n_heads * key_size) with heads contiguous, its output
    projection (n_heads * key_size, d_model); TransformerLens splits them per head:
    W_Q[h] = w_q[:, h*ks:(h+1)*ks] (d_model, d_head), W_O[h] = w_o[h*ks:(h+1)*ks, :] (d_head, d_model).
    Both divide the scores by sqrt(key_size). W_U projects the residual stream on ``out_label``'s
    directions, ordered by the output encoder's ids (what tracr's unembedding does before its argmax).
    """
    p, mc = model.params, model.model_config
    H, ks = mc.num_heads, mc.key_size
    d_model = p["token_embed"]["embeddings"].shape[1]
    sd = {"embed.W_E": p["token_embed"]["embeddings"], "pos_embed.W_pos": p["pos_embed"]["embeddings"]}
    mlp_layers, d_mlp = [], max(mc.mlp_hidden_size, 1)
    for layer in range(mc.num_layers):
        pre = f"transformer/layer_{layer}"
        for ours, theirs in (("Q", "query"), ("K", "key"), ("V", "value")):
            w, b = p[f"{pre}/attn/{theirs}"]["w"], p[f"{pre}/attn/{theirs}"]["b"]
            sd[f"blocks.{layer}.attn.W_{ours}"] = w.reshape(d_model, H, ks).transpose(1, 0, 2)
            sd[f"blocks.{layer}.attn.b_{ours}"] = b.reshape(H, ks)
        lin = p[f"{pre}/attn/linear"]
        sd[f"blocks.{layer}.attn.W_O"] = lin["w"].reshape(H, ks, d_model)
        sd[f"blocks.{layer}.attn.b_O"] = lin["b"]
        if f"{pre}/mlp/linear_1" in p:  # tracr leaves an MLP out where the program needs none
            mlp_layers.append(layer)
            l1, l2 = p[f"{pre}/mlp/linear_1"], p[f"{pre}/mlp/linear_2"]
            sd[f"blocks.{layer}.mlp.W_in"], sd[f"blocks.{layer}.mlp.b_in"] = l1["w"], l1["b"]
            sd[f"blocks.{layer}.mlp.W_out"], sd[f"blocks.{layer}.mlp.b_out"] = l2["w"], l2["b"]
    labels = list(model.residual_labels)
    out_map = model.output_encoder.encoding_map
    W_U = np.zeros((d_model, len(out_map)), np.float32)
    for value, j in out_map.items():
        W_U[labels.index(f"{out_label}:{value}"), j] = 1.0
    sd["unembed.W_U"] = W_U
    sd = {k: np.asarray(v, np.float32) for k, v in sd.items()}
    cfg = {
        "n_layers": mc.num_layers,
        "n_heads": H,
        "d_model": d_model,
        "d_head": ks,
        "d_mlp": d_mlp,
        "n_ctx": sd["pos_embed.W_pos"].shape[0],
        "d_vocab": sd["embed.W_E"].shape[0],
        "d_vocab_out": len(out_map),
        "mlp_layers": mlp_layers,
        "layernorm": bool(mc.layer_norm),
        "causal": bool(mc.causal),
    }
    return sd, cfg


def numpy_forward(sd: dict[str, np.ndarray], cfg: dict, tokens: np.ndarray) -> np.ndarray:
    """The converted weights run as TransformerLens would (no LayerNorm): (B, T) -> logits (B, T, d_vocab_out)."""
    T = tokens.shape[1]
    x = sd["embed.W_E"][tokens] + sd["pos_embed.W_pos"][:T]
    future = ~np.tril(np.ones((T, T), bool))
    for layer in range(cfg["n_layers"]):
        a = f"blocks.{layer}.attn."
        q, k, v = (np.einsum("btd,hde->bhte", x, sd[a + f"W_{n}"]) + sd[a + f"b_{n}"][None, :, None] for n in "QKV")
        scores = np.where(future, -np.inf, q @ k.transpose(0, 1, 3, 2) / np.sqrt(cfg["d_head"]))
        pattern = np.exp(scores - scores.max(-1, keepdims=True))
        pattern /= pattern.sum(-1, keepdims=True)
        x = x + np.einsum("bhte,hed->btd", pattern @ v, sd[a + "W_O"]) + sd[a + "b_O"]
        if layer in cfg["mlp_layers"]:
            m = f"blocks.{layer}.mlp."
            x = x + np.maximum(x @ sd[m + "W_in"] + sd[m + "b_in"], 0) @ sd[m + "W_out"] + sd[m + "b_out"]
    return x @ sd["unembed.W_U"]


def head_roles(sd: dict[str, np.ndarray], cfg: dict, labels: list[str], roles: dict[str, str]) -> list[dict]:
    """Which head writes which aggregate: the residual directions each head's W_O writes to, named by
    tracr's labels (``prev_1:a``, ...). The compiler's own bookkeeping, not a measurement of behaviour."""
    out = []
    for layer in range(cfg["n_layers"]):
        W_O = sd[f"blocks.{layer}.attn.W_O"]
        for head in range(cfg["n_heads"]):
            written = {labels[d].split(":")[0] for d in np.nonzero(np.abs(W_O[head]).sum(0) > 1e-6)[0]}
            role = [roles[w] for w in written if w in roles]
            out.append({"layer": layer, "head": head, "writes": sorted(written), "role": role[0] if role else "unused"})
    return out


def main() -> None:
    out_sop, prev_label, first_label = program()
    model = compiling.compile_rasp_to_model(
        out_sop, vocab=set(VOCAB), max_seq_len=MAX_SEQ_LEN, compiler_bos=BOS, causal=True
    )
    sd, cfg = convert(model, out_sop.label)
    in_map = dict(model.input_encoder.encoding_map)
    out_map = dict(model.output_encoder.encoding_map)

    # Every sequence of the maximum length, through tracr's own forward, the NumPy forward of the
    # converted weights, and the RASP program.
    seqs = np.array(list(itertools.product([in_map[t] for t in VOCAB], repeat=MAX_SEQ_LEN)), np.int64)
    tokens = np.concatenate([np.full((len(seqs), 1), in_map[BOS]), seqs], axis=1)  # (B, 1 + max_seq_len)
    runs = [model.forward(model.params, tokens[i : i + 4096]) for i in range(0, len(tokens), 4096)]
    tracr_out = np.concatenate([np.asarray(r.unembedded_output) for r in runs])  # (B, T) output ids
    # tracr's output scores before its argmax: the last residual stream read by the same W_U.
    tracr_scores = np.concatenate([np.asarray(r.transformer_output.output) for r in runs]) @ sd["unembed.W_U"]
    logits = numpy_forward(sd, cfg, tokens)  # (B, T, d_vocab_out)
    max_diff = float(np.abs(logits - tracr_scores).max())
    assert max_diff < 1e-5, f"converted weights' logits differ from tracr's scores by {max_diff}"
    # Position 0 is BOS (not an output). At position 1 there is no previous token: the program's value
    # is None, every output score is 0 up to float rounding (a tie tracr breaks by its rounding noise),
    # so the argmax is compared from position 2 on and position 1 is checked to be a tie.
    mismatch = int((logits[:, 2:].argmax(-1) != tracr_out[:, 2:]).sum())
    assert mismatch == 0, f"converted weights disagree with tracr at {mismatch} positions"
    tie_spread = float(np.ptp(tracr_scores[:, 1], axis=-1).max())
    assert tie_spread < 1e-6, f"tracr's position-1 scores are not a tie: spread {tie_spread}"
    id_to_word = {i: w for w, i in in_map.items()}
    expected = np.vectorize(lambda i: out_map[id_to_word[i]])(tokens[:, 1:-1])  # the token at t-1, t >= 2
    rasp_wrong = int((tracr_out[:, 2:] != expected).sum())
    assert rasp_wrong == 0, f"tracr's model disagrees with the program at {rasp_wrong} positions"
    # Spot-check the RASP evaluator itself on a few inputs (slow in pure Python, so a sample).
    rng = np.random.default_rng(0)
    for row in rng.choice(len(seqs), 64, replace=False):
        words = [id_to_word[i] for i in seqs[row]]
        got = model.apply([BOS, *words]).decoded[2:]
        assert got == rasp.evaluate(out_sop, words)[1:], (words, got)

    sample = rng.choice(len(tokens), N_SAMPLE, replace=False)
    labels = list(model.residual_labels)
    roles = {prev_label: "previous_token", first_label: "first_token"}
    heads = head_roles(sd, cfg, labels, roles)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        OUT.with_suffix(".npz"),
        **sd,
        inputs=tokens[sample],
        tracr_outputs=tracr_out[sample],
        tracr_scores=tracr_scores[sample].astype(np.float32),
    )
    meta = {
        "what": "tracr-compiled transformer: a previous-token head and a first-token head in layer 0, "
        "an MLP passing the previous token to the output",
        "program": "prev = Aggregate(Select(indices, indices, q == k + 1), tokens); "
        "first = Aggregate(Select(indices, indices, k == 0), tokens); "
        "out = SequenceMap(lambda x, y: x, prev, first); categorical",
        "compile": {"vocab": list(VOCAB), "max_seq_len": MAX_SEQ_LEN, "compiler_bos": BOS, "causal": True},
        "config": cfg,
        "input_encoding": in_map,
        "bos_id": in_map[BOS],
        "output_encoding": out_map,
        "heads": heads,
        "residual_labels": labels,
        "checked": {
            "sequences": len(tokens),
            "converted_vs_tracr_argmax_mismatches_from_position_2": mismatch,
            "converted_vs_tracr_max_abs_score_difference": max_diff,
            "position_1_score_spread_max": tie_spread,
            "tracr_vs_program_mismatches": rasp_wrong,
        },
        "outputs_note": "tracr_outputs[:, 0] is the BOS position (not an output); at position 1 there is no "
        "previous token, the program's value is None and every output score is 0 up to float rounding, so "
        "tracr's argmax there is a tie broken by rounding noise; tracr_scores are its scores before the argmax",
        "versions": {
            "python": platform.python_version(),
            **{p: version(p) for p in ("tracr-pypi", "jax", "jaxlib", "dm-haiku", "numpy")},
        },
        "command": COMMAND,
    }
    OUT.with_suffix(".json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(json.dumps({"config": cfg, "heads": heads, "checked": meta["checked"]}, indent=1))


if __name__ == "__main__":
    main()
