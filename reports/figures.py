"""The report's figures, computed from the model itself (not from any hypothesis's internals).

Each figure shows what a claim of SPEC §4 looks like in the weights or activations, so a reader can
judge the verdict by eye:

- Layer-1 and Layer-2 attention on one example sequence, the claimed cells outlined (§4.1, §4.2);
- Layer 1's positional QK matrix  S = W_pos[:12] W_Q W_K^T W_pos[:12]^T  (§4.1);
- Layer 2's variable-identity matrix  M = (E_var OV_1) QK_2 (E_var OV_1)^T,  OV_1 = W_V W_O (Layer 1),
  QK_2 = W_Q W_K^T (Layer 2), built with TransformerLens' ``FactoredMatrix`` (§4.2);
- cosine similarity of ``blocks.1.hook_resid_mid`` at ``=`` for matched and mismatched pairs (§4.3);
- one Layer-2 MLP neuron over the grid ``PAD×12 + n m =`` next to its best single-frequency fit
  cos(2πkn/N + α) + cos(2πkm/N + β), and the spectrum with the key frequencies (§4.4);
- per claim, a forest-style plot of every evidence item: value, interval, threshold, controls.

Everything is deterministic for a (model, task, seed). Drawing them is a fair share of
``assignadd-verify``'s work (bench/RESULTS.md, "what the figures cost"), which ``--json`` alone skips.
"""

from __future__ import annotations

import copy
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from ..data.tokens import POS_LHS, POS_RHS, PREFIX_LEN
from ..model import hooks
from ..model.components import PAPER, Components
from ..random_streams import torch_generator
from .html import join, tag
from .png import REPORT_DPI, png_bytes, pyplot

# The look of every figure: a white background, small type (the figures sit beside text in a page).
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.edgecolor": "#262626",
    "axes.linewidth": 0.8,
    "axes.grid": False,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
}


def claim_of() -> dict[str, str]:
    """{figure key: the claim it illustrates}, in report order: each registered claim's declared
    ``figures`` in registry order."""
    from ..hypotheses import REGISTRY

    return {key: cid for cid, cls in REGISTRY.items() for key in cls.figures}


@dataclass
class Figure:
    key: str
    claim: str | None  # the claim id it illustrates, or None
    title: str
    caption: str  # plain text (escaped in a page) or ``Markup`` built with reports/html.py
    png: bytes


def styled_pyplot():
    """``matplotlib.pyplot`` (``png.pyplot``) with this report's look (``RC``) set."""
    plt = pyplot()
    plt.rcParams.update(RC)
    return plt


def figure_png(fig) -> bytes:
    """A report figure as PNG bytes (``png.png_bytes`` at ``REPORT_DPI``); the figure is closed."""
    return png_bytes(fig, dpi=REPORT_DPI)


def _model_figure(key: str, title: str, caption, fig) -> Figure:
    """Model figure ``key`` (the claim that declares it), drawn; ``fig`` is closed."""
    return Figure(key, claim_of()[key], title, caption, figure_png(fig))


def _mark(ax, cells, color="#d62728"):
    from matplotlib.patches import Rectangle

    for q, k in cells:
        ax.add_patch(Rectangle((k - 0.5, q - 0.5), 1, 1, fill=False, edgecolor=color, linewidth=2.0))


def _matrix_axes(
    data, figsize, vlim, title: str, cmap="RdBu_r", label="", xlabel="key position", ylabel="query position"
):
    """A figure of ``data`` (query rows, key columns) as an image over ``vlim``, with its colour bar; (fig, ax)."""
    fig, ax = styled_pyplot().subplots(figsize=figsize, layout="constrained")
    im = ax.imshow(data, cmap=cmap, vmin=vlim[0], vmax=vlim[1])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=label)
    return fig, ax


def attention_figures(model, task, seed: int, components: Components = PAPER) -> list[Figure]:
    """The previous-token head's and the fetching head's patterns on one sequence (the paper's Layer 1 and
    Layer 2 heads, or those found: SPEC §2.1)."""
    from ..data import operand_sources, render, value_positions

    vocab = task.vocab
    tokens = task.pool("2var_train", 1, seed=seed)[0][0]  # one sequence, both operands variables: (SEQ_LEN,)
    _, cache = model.run_with_cache(
        tokens[None].to(_device(model)), names_filter=[hooks.act_name("pattern", l) for l in range(model.cfg.n_layers)]
    )
    labels = render(tokens, vocab).split()
    T = len(labels)
    vpos = value_positions(tokens[None], vocab)[0].nonzero().flatten().tolist()
    src = operand_sources(tokens[None], vocab)[0].tolist()
    claimed = {
        0: [(t, t - 1) for t in vpos] + [(T - 1, POS_LHS), (T - 1, POS_RHS)],
        1: [(T - 1, s) for s in src if s >= 0],
    }
    what = {
        0: "each value token attends to the variable right before it; '=' attends to the operand slots",
        1: "'=' attends to the value tokens of its operands (the slots themselves for constants)",
    }
    sequence = tag("code", " ".join(labels))
    c = components
    figs = []
    for layer, (at, heads) in enumerate([(c.prev_layer, (c.prev_head,)), (c.fetch_layer, c.fetch_heads)]):
        layer_pattern = cache[hooks.act_name("pattern", at)][0].float()  # (H, T_q, T_k)
        pattern = layer_pattern[heads[0]] if len(heads) == 1 else layer_pattern[list(heads)].mean(0)
        if layer == 0 and c.prev_eq_also:  # `=`'s row is the role's: the mean of the heads that fill it
            pattern[T - 1] = layer_pattern[list(c.prev_eq_heads), T - 1].mean(0)
        pattern = pattern.cpu().numpy()  # (T_q, T_k)
        shown = c.prev_eq_heads if layer == 0 else heads
        where = f"blocks.{at}" + (f" head {'+'.join(str(h) for h in shown)}" if shown != (0,) else "")
        if len(shown) > 1:  # a role of several heads: their mean pattern (Layer 1: `=`'s row only)
            where += ", mean"
        axes_title = f"Layer {layer + 1} [{where}] attention"
        fig, ax = _matrix_axes(pattern, (5.4, 4.6), (0, 1), axes_title, cmap="Blues", label="attention weight")
        ax.set_xticks(range(T), labels, rotation=90, fontsize=8)
        ax.set_yticks(range(T), labels, fontsize=8)
        _mark(ax, claimed[layer])
        caption = join(["Sequence: ", sequence, f". Red outlines: the cells the claim predicts ({what[layer]})."])
        title = f"Layer {layer + 1} attention pattern on an example sequence"
        figs.append(_model_figure(f"attention_layer{layer + 1}", title, caption, fig))
    return figs


def _device(model):
    return next(model.parameters()).device


def resid_mid_at_eq(model, tokens: torch.Tensor, components: Components = PAPER) -> torch.Tensor:
    """The adding MLP's input (``blocks.1.hook_resid_mid`` on the paper's layout) at the last position,
    (B, SEQ_LEN) -> (B, d_model); the forward pass stops there (the MLP over all positions would be most
    of the cost)."""
    from ..interventions import capture

    hook = components.RESID_MID_2
    return capture(model, tokens.to(_device(model)), [hook], pos=-1)[hook].float().cpu()


def positional_qk_figure(model, components: Components = PAPER) -> Figure:
    a, h = model.blocks[components.prev_layer].attn, components.prev_head
    W_pos = model.pos_embed.W_pos[:PREFIX_LEN]  # (PREFIX_LEN, D): the prefix positions
    S = (W_pos @ a.W_Q[h] @ a.W_K[h].T @ W_pos.T).float().cpu().numpy()  # (PREFIX_LEN, PREFIX_LEN) query x key
    shown = np.where(np.tril(np.ones_like(S, dtype=bool)), S, np.nan)  # causal: keys <= query
    lim = np.nanmax(np.abs(shown))
    fig, ax = _matrix_axes(shown, (4.6, 4.0), (-lim, lim), "Layer 1 positional QK  S = W_pos W_Q W_Kᵀ W_posᵀ")
    _mark(ax, [(q, q - 1) for q in range(1, PREFIX_LEN)])
    ax.set_xticks(range(PREFIX_LEN))
    ax.set_yticks(range(PREFIX_LEN))
    hits = sum(
        int(np.nanargmax(np.where(_prev_token_mask(q), shown[q], np.nan)) == q - 1) for q in range(1, PREFIX_LEN)
    )
    return _model_figure(
        "positional_qk",
        "Layer 1 positional QK matrix",
        f"Scores between prefix positions from the positional embeddings alone (future keys blank). "
        f"Red outlines: the previous position q−1. With keys &gt; q, q and q−2 masked (SPEC §4.1), "
        f"the argmax is q−1 in {hits}/{PREFIX_LEN - 1} rows.",
        fig,
    )


def _prev_token_mask(q: int) -> np.ndarray:
    keep = np.arange(PREFIX_LEN) <= q
    keep[q] = False
    if q >= 2:
        keep[q - 2] = False
    return keep


def identity_matrix_figure(model, task, components: Components = PAPER) -> Figure:
    from transformer_lens import FactoredMatrix

    c, vocab = components, task.vocab
    a1, a2 = model.blocks[c.prev_layer].attn, model.blocks[c.fetch_layer].attn
    h1 = c.prev_head
    E_var = model.embed.W_E[vocab.first_var : vocab.size]  # (V, D)
    OV_1 = FactoredMatrix(a1.W_V[h1], a1.W_O[h1])  # (D, D)
    X = E_var @ OV_1  # (V, D), factored
    # a fetching role of several heads: the mean of their matrices, as identity_qk reads it
    Ms = [(X @ FactoredMatrix(a2.W_Q[h2], a2.W_K[h2].T) @ X.T).AB.float() for h2 in c.fetch_heads]
    M = (Ms[0] if len(Ms) == 1 else torch.stack(Ms).mean(0)).cpu().numpy()  # (V, V): query variable x key variable
    V = M.shape[0]
    diag = int((M.argmax(axis=1) == np.arange(V)).sum())
    off = np.where(np.eye(V, dtype=bool), -np.inf, M)
    margin = float(np.mean(np.diag(M) - off.max(axis=1)))
    lim = np.abs(M).max()
    title = "Layer 2 identity QK  M = (E_var OV₁) QK₂ (E_var OV₁)ᵀ"
    fig, ax = _matrix_axes(
        M, (4.6, 4.0), (-lim, lim), title, xlabel="key: value token of variable", ylabel="query: '=' reading variable"
    )
    _mark(ax, [(i, i) for i in range(V)], color="#222222")
    ax.scatter(M.argmax(axis=1), np.arange(V), s=16, color="#ffbf00", edgecolors="black", linewidths=0.5, zorder=3)
    names = list(vocab.var_names)
    ax.set_xticks(range(V), names)
    ax.set_yticks(range(V), names)
    return _model_figure(
        "identity_matrix",
        "Layer 2 variable-identity matrix",
        f"Black outlines: the diagonal (same variable); yellow dots: each row's argmax. "
        f"Diagonal argmax in {diag}/{V} rows (chance {1}/{V}); mean diagonal margin {margin:.3g}.",
        fig,
    )


def resid_mid_cosine_figure(model, task, seed: int, n: int = 400, components: Components = PAPER) -> Figure:
    """Matched: a sequence with variable operands vs the same sequence with each variable operand
    replaced by its value (prefix unchanged). Mismatched: the constant version of another sequence."""
    from ..data import operand_sources

    vocab = task.vocab
    t1, _ = task.pool("1var_train", n // 2, seed=seed)
    t2, _ = task.pool("2var_train", n - n // 2, seed=seed)
    var_tokens = torch.cat([t1, t2])  # (n, SEQ_LEN)
    const_tokens = var_tokens.clone()
    src = operand_sources(var_tokens, vocab)  # (n, 2)
    rows = torch.arange(len(var_tokens))
    for j, slot in enumerate((POS_LHS, POS_RHS)):
        const_tokens[:, slot] = var_tokens[rows, src[:, j].clamp(min=0)]
    var_acts, const_acts = (resid_mid_at_eq(model, t, components) for t in (var_tokens, const_tokens))
    cos = torch.nn.functional.cosine_similarity
    matched = cos(var_acts, const_acts).numpy()
    partners = torch_generator(seed, "resid_mid cosine figure mismatched partners")
    perm = torch.randperm(len(var_tokens), generator=partners)
    sums = (const_tokens[:, POS_LHS] + const_tokens[:, POS_RHS]) % vocab.modulus
    keep = sums != sums[perm]  # a mismatched partner must have another sum
    mismatched = cos(var_acts[keep], const_acts[perm][keep]).numpy()
    fig, ax = styled_pyplot().subplots(figsize=(5.6, 3.2), layout="constrained")
    bins = np.linspace(min(-0.2, float(mismatched.min()), float(matched.min())), 1.0, 50)
    for values, color, label in (
        (mismatched, "#7f7f7f", f"mismatched (n={len(mismatched)})"),
        (matched, "#1f77b4", f"matched (n={len(matched)})"),
    ):
        ax.hist(values, bins=bins, density=True, histtype="stepfilled", color=color, alpha=0.25)
        ax.hist(values, bins=bins, density=True, histtype="step", color=color, label=label)
    ax.set_xlabel(f"cosine similarity of {components.RESID_MID_2} at '='")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Constant vs variable operands with the same values")
    return _model_figure(
        "resid_mid_cosine",
        "Shared residual at the Layer-2 MLP input",
        f"Median cosine: matched {np.median(matched):.3f}, mismatched {np.median(mismatched):.3f}. "
        f"Pairs from the 1- and 2-variable training pools (seed {seed}).",
        fig,
    )


def fourier_figures(model, task, components: Components = PAPER) -> list[Figure]:
    """The best-fitted Layer-2 MLP neuron beside its single-frequency fit, and the spectrum, from the
    ``fourier_neurons`` claim's own analysis (``hypotheses/measures/fourier.py``: the same grid, live
    neurons, fits and key-frequency rule), so the figures show what the verdict was decided on."""
    from ..hypotheses.measures import fourier

    plt = styled_pyplot()
    vocab = task.vocab
    N = vocab.modulus
    grid = fourier.grids(model, vocab, components=components)
    pre = grid[fourier.MLP2_PRE]  # (N, N, d_mlp) float64
    r = fourier.neuron_fve(pre, fourier.mlp_input_scale(model, grid[fourier.RESID_MID2], components=components))
    if len(r["units"]) == 0:
        raise ValueError("no live Layer-2 MLP neuron on the grid")
    i = int(r["fve"].argmax())
    neuron, k = int(r["units"][i]), int(r["best_k"][i])
    fit = fourier.fitted_cos_form(pre[:, :, neuron], k)
    A = (pre[:, :, neuron] - fit["mean"]).numpy()
    fitted = (fit["fitted"] - fit["mean"]).numpy()

    fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.8), layout="constrained")
    lim = np.abs(A).max()
    for ax, data, title in (
        (axes[0], A, f"neuron {neuron}: pre-activation (centred)"),
        (axes[1], fitted, f"fit: cos(2π·{k}n/{N}+α) + cos(2π·{k}m/{N}+β)"),
    ):
        im = ax.imshow(data, cmap="RdBu_r", vmin=-lim, vmax=lim, origin="lower")
        ax.set_xlabel("m (RHS operand)")
        ax.set_ylabel("n (LHS operand)")
        ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=axes, fraction=0.025, pad=0.02)
    fve = (
        f" for all {N}×{N} (n, m); pre-activation at '='. Neuron {neuron} (the best fitted) has "
        f"{float(r['fve'][i]):.1%} of its variance explained by frequency k = {k}. Across the "
        f"{len(r['units'])} live neurons, median best-single-frequency FVE {float(r['fve'].median()):.1%}."
    )
    caption = join(["Input ", tag("code", "PAD×12 + n m ="), fve])
    figs = [_model_figure("fourier_neuron", "A Layer-2 MLP neuron and its Fourier fit", caption, fig)]

    share = fourier.frequency_share(r["power"][:, r["live"]]).numpy()  # (K,)
    K = len(share)
    ks = np.arange(1, K + 1)
    key = set(fourier.key_frequencies(model, vocab, grid, components=components))
    counts = np.bincount((r["best_k"][r["fve"] >= 0.5] - 1).numpy(), minlength=K)
    fig, ax = plt.subplots(figsize=(8.0, 2.8), layout="constrained")
    ax.bar(ks, share, color=["#d62728" if kk in key else "#9ecae1" for kk in ks])
    ax.axhline(fourier.KEY_SHARE_FACTOR / K, color="#555555", ls="--", lw=0.8)
    for kk, sh, c in zip(ks, share, counts):
        if c:
            ax.text(kk, sh, str(int(c)), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(ks)
    ax.set_xlabel("frequency k")
    ax.set_ylabel("share of single-frequency power")
    ax.set_title("Layer 2 MLP pre-activations: power by frequency (live neurons)")
    keys = ", ".join(str(kk) for kk in sorted(key)) or "none"
    caption = (
        f"Each frequency's share of the single-frequency power of the live Layer-2 MLP neurons on the "
        f"grid above (the fourier_neurons claim's spectrum). Red: key frequencies by the claim's rule, "
        f"at least {fourier.KEY_SHARE_FACTOR:g} times the even share (dashed; k = {keys}). Numbers "
        f"over bars: neurons whose best frequency is k and explains ≥ 50% of their variance."
    )
    return figs + [_model_figure("fourier_spectrum", "Spectrum of key frequencies", caption, fig)]


def model_figures(model, task, seed: int = 0, components: Components = PAPER) -> list[Figure]:
    """Every figure computed from the model, in report order, at ``components`` (where the claims found
    their components, SPEC §2.1). A figure that cannot be drawn (an odd model, a task without some pool)
    becomes a note in the report, never a crash of the command."""
    c = components
    steps = [
        ("attention", lambda: attention_figures(model, task, seed, c)),
        ("positional_qk", lambda: [positional_qk_figure(model, c)]),
        ("identity_matrix", lambda: [identity_matrix_figure(model, task, c)]),
        ("resid_mid_cosine", lambda: [resid_mid_cosine_figure(model, task, seed, components=c)]),
        ("fourier", lambda: fourier_figures(model, task, c)),
    ]
    figs, of = [], claim_of()
    with torch.no_grad():
        for key, make in steps:
            try:
                figs.extend(make())
            except Exception as e:  # noqa: BLE001 (reported in the page instead)
                claim = of.get(key) or of.get(f"{key}_neuron") or of.get(f"{key}_layer1")
                figs.append(Figure(key, claim, f"Figure '{key}' could not be drawn", f"{type(e).__name__}: {e}", b""))
    order = list(of)
    return sorted(figs, key=lambda f: order.index(f.key) if f.key in order else len(order))


def _fmt(x) -> str:
    """A number in a figure's title: 3 significant digits, always (``99.99`` is ``100``, ``1234.5`` is
    ``1.23e+03``). Not ``render.fmt``, which keeps up to 4 significant digits above 1 for the report's
    text and tables: a title has room for less, and the PNG bytes of every report rest on this form."""
    if x is None:
        return "n/a"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return f"{x:.3g}"


def forest_figure(claim: dict) -> Figure | None:
    """One row per evidence item (from ``ClaimResult.to_dict()``): the model's value with its interval
    (filled), each control's (hollow), the threshold (dashed) with the failing side shaded."""
    items = claim.get("evidence") or []
    if not items:
        return None
    markers = ["s", "^", "D", "v", "P", "X", "<", ">"]
    control_names = sorted({c for e in items for c in e.get("controls", {})})
    heights = [1 + len(e.get("controls") or {}) for e in items]
    size, ratios = (7.6, 0.3 + sum(0.32 * h + 0.55 for h in heights)), [h + 1.2 for h in heights]
    fig, axes = styled_pyplot().subplots(
        len(items), 1, figsize=size, squeeze=False, layout="constrained", gridspec_kw={"height_ratios": ratios}
    )
    for ax, e in zip(axes[:, 0], items):
        rows = [("model under test", e["measurement"], "o", True)]
        rows += [
            (c, e["controls"][c], markers[control_names.index(c) % len(markers)], False)
            for c in sorted(e.get("controls", {}))
        ]
        t = e["threshold"]["value"]
        xs = [t]
        for i, (name, m, marker, filled) in enumerate(rows):
            v, (lo, hi) = m.get("value"), (m.get("ci") or [None, None])[:2]
            if v is None:
                ax.text(t, -i, "  not computed", fontsize=7, va="center", color="#888888")
                continue
            lo, hi = (v if lo is None else lo), (v if hi is None else hi)
            color, face, width, size = ("#1f77b4", "#1f77b4", 2.2, 7) if filled else ("#555555", "white", 1.3, 6)
            ax.plot([lo, hi], [-i, -i], color=color, linewidth=width)
            ax.plot([v], [-i], marker=marker, color=color, markersize=size, markerfacecolor=face, linestyle="none")
            xs += [lo, hi, v]
        lo_x, hi_x = min(xs), max(xs)
        pad = 0.08 * (hi_x - lo_x) if hi_x > lo_x else 0.1 * max(abs(hi_x), 1.0)
        lo_x, hi_x = lo_x - pad, hi_x + pad
        ax.axvline(t, color="#d62728", linestyle="--", linewidth=1.2)
        failing = (lo_x, t) if e["threshold"]["direction"] == ">=" else (t, hi_x)
        ax.axvspan(*failing, color="#d62728", alpha=0.07)
        ax.set_xlim(lo_x, hi_x)
        ax.set_ylim(-len(rows) + 0.5, 0.5)
        ax.set_yticks([-i for i in range(len(rows))], [r[0] for r in rows], fontsize=8)
        mark = "✓" if e["passed"] else "✗"
        ax.set_title(
            f"{mark} {e['name']} ({e['kind']}{'' if e['required'] else ', optional'}): "
            f"{_fmt(e['measurement']['value'])}; needs {e['threshold']['bound']} bound "
            f"{e['threshold']['direction']} {_fmt(t)} (dashed)",
            fontsize=9,
            loc="left",
        )
        ax.tick_params(axis="x", labelsize=8)
        ax.tick_params(axis="y", length=0)
        ax.spines[["right", "top"]].set_visible(False)
    return Figure(
        f"forest_{claim['claim']}",
        claim["claim"],
        "Evidence at a glance",
        "One panel per evidence item: the model under test (filled, with its interval), each control "
        "(hollow), the pre-registered threshold (dashed red; the shaded side fails). The verdict compares "
        "the conservative bound of the interval with the threshold.",
        figure_png(fig),
    )


def _evidence_item(claim: dict, name: str) -> dict | None:
    return next((e for e in claim.get("evidence") or [] if e["name"] == name), None)


def whole_algorithm_figure(claim: dict) -> Figure | None:
    """Where the paper's algorithm explains the model and where it does not (the caption says how), from
    the claim's JSON; None when the items are missing (another version of the claim, an error)."""
    routing = _evidence_item(claim, "routing_scrub_recovers")
    addition = _evidence_item(claim, "addition_scrub_recovers")
    if routing is None or addition is None:
        return None
    r_ex, a_ex = routing["measurement"].get("extra") or {}, addition["measurement"].get("extra") or {}
    groups = list(r_ex.get("group_sizes") or {})
    if not groups:
        return None
    columns = ["model", "routing scrubbed", "addition scrubbed"]
    sources = [
        r_ex.get("model_accuracy_by_group") or {},
        r_ex.get("scrubbed_accuracy_by_group") or {},
        a_ex.get("scrubbed_accuracy_by_group") or {},
    ]
    grid = np.array([[np.nan if s.get(g) is None else s[g] for s in sources] for g in groups], float)
    labels = [f"{g} (n={r_ex['group_sizes'][g]})" for g in groups]

    doubled = _evidence_item(claim, "doubled_pair_errors_are_the_adders")
    per_pair = ((doubled or {}).get("measurement", {}).get("extra") or {}).get(
        "by_doubled_pair [model, ideal input, weights-only adder]"
    ) or {}
    ncols = 2 if per_pair else 1
    size, ratios = (7.6, 0.3 + 0.24 * max(len(groups), len(per_pair), 8)), [1.25, 1][:ncols]
    fig, axes = styled_pyplot().subplots(
        1, ncols, figsize=size, squeeze=False, layout="constrained", gridspec_kw={"width_ratios": ratios}
    )

    def heat(ax, values, rows, cols, title):
        im = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(cols)), cols, rotation=20, ha="right")
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        for (i, j), v in np.ndenumerate(values):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6.5, color="black" if v > 0.6 else "white")
        ax.set_title(title, fontsize=9, loc="left")
        return im

    im = heat(axes[0, 0], grid, labels, columns, "accuracy by group")
    if per_pair:
        pairs = sorted(per_pair, key=int)
        values, rows = np.array([per_pair[p] for p in pairs], float), [f"({p}, {p})" for p in pairs]
        heat(axes[0, 1], values, rows, ["model", "ideal input", "weights-only adder"], "held-out doubled pairs")
    fig.colorbar(im, ax=axes[0, -1], shrink=0.6, label="accuracy")
    return Figure(
        f"breakdown_{claim['claim']}",
        claim["claim"],
        "Where the algorithm explains the model",
        "Left: accuracy of the model and of the model scrubbed by the paper's correspondence (routing: "
        "Layer 1's output resampled from sequences that agree on what the hypothesis says it carries; "
        "addition: Layer 2's output at = from fresh sequences with the same operand values), per pool, "
        "operand slot, doubled pair and variable. Right: for each held-out doubled pair (n, n), the "
        "model's accuracy, the addition module's given a perfectly routed input (its constant twin's "
        "Layer-2 output), and the weights-only adder's (OV_2 then MLP_2). Where the model and the ideal "
        "input fail together, the fault is the adder's, not the routing's.",
        figure_png(fig),
    )


def claim_figures(claim: dict) -> list[Figure]:
    """The figures drawn from one claim's result (JSON only): its forest plot, and for the whole
    algorithm its breakdown heatmap."""
    out = [forest_figure(claim)]
    if claim.get("claim") == "whole_algorithm":
        out.append(whole_algorithm_figure(claim))
    return [f for f in out if f is not None]


class Painter:
    """Draws a report's figures on a worker thread while the claims run (torch releases the GIL in its
    kernels, so the two overlap on a multi-core CPU): the model figures from a private copy of the model
    (claims attach temporary hooks to theirs), each claim's evidence plot once it is decided. Figures use
    explicit generators only, so the overlap cannot change any claim's result."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assignadd-figures")
        self._model = None
        self._forest = {}

    def start(self, ctx, located) -> None:
        """Begin the model figures of ``ctx.model`` at the located components (the paper's when none)."""
        at = located.components if located is not None else PAPER
        self._model = self._pool.submit(model_figures, copy.deepcopy(ctx.model).eval(), ctx.task, ctx.seed, at)

    def claim(self, result: dict) -> None:
        """Begin the evidence plot of one decided claim (its result as a dictionary)."""
        self._forest[result["claim"]] = self._pool.submit(claim_figures, result)

    def figures(self, ids: list[str]) -> list[Figure]:
        """Every figure, in report order (the claims ``ids``' plots, then the model's), once drawn."""
        try:
            return [f for c in ids for f in self._forest[c].result()] + self._model.result()
        finally:
            self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
