"""The paper's transformer (SPEC §2), as a TransformerLens ``HookedRootModule``.

Parameter and buffer names and shapes are those of a TransformerLens 2.x ``HookedTransformer`` state
dict, so the authors' checkpoints load unchanged; hook points carry the legacy names
(``blocks.0.attn.hook_pattern``, ...), so TransformerLens' ``ActivationCache``, ``patching`` and
``FactoredMatrix`` and nnsight work on it.

Forward (SPEC §2.2), per layer l:
    q, k, v = x W_Q + b_Q, x W_K + b_K, x W_V + b_V           # (B, T, H, d_head)
    scores = q k^T / sqrt(d_head), future keys masked          # (B, H, T, T)
    z = softmax(scores) v;  attn_out = z W_O + b_O              # (B, T, d_model)
    resid_mid = x + attn_out
    mlp_out = relu(resid_mid W_in + b_in) W_out + b_out        # zero in Layer 1 (no MLP)
    x = resid_mid + mlp_out
logits = x W_U + b_U

With ``ModelConfig.layernorm`` (an extension beyond the paper's model, SPEC §2.1) the blocks are
pre-LayerNorm, as TransformerLens' ``normalization_type="LN"``: attention reads ln1(x), the MLP reads
ln2(resid_mid), the unembedding reads ln_final(x), where
    ln(x) = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + 1e-5) * w + b   # over d_model

Each piece is written once (``Attention.forward``, ``Block.attend``, ``Block.mlp_tail``, ``unembed_tail``);
the hooked forward, its ``last_only`` cut and the hook-free training step are the one
``AssignAddTransformer.forward`` with flags.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import ClassVar

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from ..data.tokens import N_SPECIAL, Vocab, render, to_tokens


@dataclass(frozen=True)
class ModelConfig:
    """The architecture of SPEC §2.1, and the answers TransformerLens' utilities expect from a ``cfg``.

    The fields are what a checkpoint stores (``to_dict``). Below them, the config fields that
    ``transformer_lens.patching`` and ``ActivationCache`` read, fixed by this architecture.
    """

    d_vocab: int = 74
    d_vocab_out: int = 59
    n_ctx: int = 16
    d_model: int = 128
    d_head: int = 128
    n_heads: int = 1
    d_mlp: int = 512
    n_layers: int = 2
    # Layers whose MLP computes; the others hold zero, frozen MLP weights (the paper: Layer 2 only).
    mlp_layers: tuple[int, ...] = (1,)
    # Pre-LayerNorm blocks and a final LayerNorm (TransformerLens "LN"); the paper's model has none.
    layernorm: bool = False
    # Where the weights are (TransformerLens' patching allocates its results there); not compared, not saved.
    device: str = field(default="cpu", compare=False)

    def __post_init__(self):
        """Refuse a config that builds no model, with one line naming the field."""
        for name in ("d_vocab", "d_vocab_out", "n_ctx", "d_model", "d_head", "n_heads", "d_mlp", "n_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        bad = [
            m for m in self.mlp_layers if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < self.n_layers
        ]
        if bad:
            raise ValueError(f"mlp_layers: {bad[0]!r} is not a layer index 0..{self.n_layers - 1}")
        if len(set(self.mlp_layers)) != len(self.mlp_layers):
            raise ValueError(f"mlp_layers lists a layer twice: {list(self.mlp_layers)}")
        if not isinstance(self.layernorm, bool):
            raise ValueError(f"layernorm must be true or false, got {self.layernorm!r}")

    @property
    def modulus(self) -> int:
        return self.d_vocab_out

    @property
    def first_var(self) -> int:
        """Token id of the first variable: after the numbers, `+`, `=` and PAD (SPEC §1.1)."""
        return self.d_vocab_out + N_SPECIAL

    @property
    def n_vars(self) -> int:
        return self.d_vocab - self.d_vocab_out - N_SPECIAL

    # ----- fields TransformerLens reads, fixed by the architecture --------------------------------
    eps: ClassVar[float] = 1e-5  # LayerNorm's epsilon, TransformerLens' default
    n_key_value_heads: ClassVar[None] = None  # as many key/value heads as query heads (no grouped-query attention)

    @property
    def attn_only(self) -> bool:
        """True only for a model with no MLP at all (here Layer 2 has one; Layer 1's ``mlp_out`` is zero)."""
        return not self.mlp_layers

    @property
    def normalization_type(self) -> str | None:
        """None: no LayerNorm anywhere (SPEC §2.1), so ``apply_ln_to_stack`` returns the stack unchanged;
        ``"LN"`` with ``layernorm``: it centres the stack and divides by the cached ``hook_scale``."""
        return "LN" if self.layernorm else None

    def to_dict(self) -> dict:
        """The stored fields; ``layernorm`` only when on, so the paper's config reads as it always has."""
        d = asdict(self)
        d.pop("device")
        d["mlp_layers"] = list(self.mlp_layers)
        if not self.layernorm:
            d.pop("layernorm")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        d = dict(d)
        d.pop("device", None)
        d["mlp_layers"] = tuple(d.get("mlp_layers", (1,)))
        return cls(**d)


class LayerNorm(nn.Module):
    """TransformerLens' LayerNorm ("LN"): centre, divide by the root mean square, then scale and shift
    by the learned ``w`` (init 1) and ``b`` (init 0), computed in fp32. ``hook_scale`` (B, T, 1) is the
    divisor ActivationCache's ``apply_ln_to_stack`` reads; ``hook_normalized`` is the output, as in
    TransformerLens 2.x. Works on any (..., d_model), e.g. the per-head copies (B, T, H, d_model)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.eps = cfg.eps
        self.w = nn.Parameter(torch.ones(cfg.d_model))
        self.b = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_scale = HookPoint()  # (..., 1)
        self.hook_normalized = HookPoint()  # (..., d_model)

    def forward(self, x, hooked: bool = True):
        dtype = x.dtype
        x = x.float()
        x = x - x.mean(-1, keepdim=True)
        scale = _fire(self.hook_scale, (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt(), hooked)
        return _fire(self.hook_normalized, x / scale * self.w + self.b, hooked).to(dtype)


def _fire(point: HookPoint, x: torch.Tensor, hooked: bool) -> torch.Tensor:
    return point(x) if hooked else x


def _norm(ln: LayerNorm | None, x: torch.Tensor, hooked: bool = True) -> torch.Tensor:
    return x if ln is None else ln(x, hooked)


def _has_hooks(*modules: nn.Module | None) -> bool:
    """Whether a hook point in ``modules`` holds a hook (TransformerLens' public ``HookPoint.has_hooks``)."""
    return any(
        isinstance(m, HookPoint) and m.has_hooks() for module in modules if module is not None for m in module.modules()
    )


class Embed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))

    def forward(self, tokens):  # (B, T) -> (B, T, d_model)
        # F.embedding, not W_E[tokens]: indexing's CPU backward accumulates in a thread-dependent
        # order, so multi-threaded training would not be bit-reproducible (nor resume exactly).
        return F.embedding(tokens, self.W_E)


class PosEmbed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))

    def forward(self, tokens):  # (B, T) -> (B, T, d_model)
        B, T = tokens.shape
        return self.W_pos[:T].unsqueeze(0).expand(B, T, -1)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        H, D, Dh = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(H, D, Dh))
        self.W_K = nn.Parameter(torch.empty(H, D, Dh))
        self.W_V = nn.Parameter(torch.empty(H, D, Dh))
        self.W_O = nn.Parameter(torch.empty(H, Dh, D))
        self.b_Q = nn.Parameter(torch.zeros(H, Dh))
        self.b_K = nn.Parameter(torch.zeros(H, Dh))
        self.b_V = nn.Parameter(torch.zeros(H, Dh))
        self.b_O = nn.Parameter(torch.zeros(D))
        self.register_buffer("mask", torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool)))
        # TransformerLens' masked-score value, kept for its state dict; fixed at -inf (``load_checkpoint``
        # refuses any other), so the forward fills with -inf itself and never reads it back from the device.
        self.register_buffer("IGNORE", torch.tensor(-torch.inf))
        self.scale = math.sqrt(Dh)
        self.hook_q = HookPoint()  # (B, T, H, d_head)
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_z = HookPoint()
        self.hook_attn_scores = HookPoint()  # (B, H, T_q, T_k), after the causal mask
        self.hook_pattern = HookPoint()
        # TransformerLens' per-head copies of the attention input (B, T, H, d_model), which fire only
        # while ``split_qkv_input`` is on (``set_use_split_qkv_input``, as its direct-path patching does).
        self.hook_q_input = HookPoint()
        self.hook_k_input = HookPoint()
        self.hook_v_input = HookPoint()
        self.split_qkv_input = False

    def forward(
        self,
        x,
        norm: LayerNorm | None = None,
        *,
        hooked: bool = True,
        x_last: torch.Tensor | None = None,
        biases: bool = True,
    ):
        """The attention's output, (B, T, D) -> (B, T, D): the one place its arithmetic is written.

        ``norm``: the block's ln1 (with ``layernorm``), applied to what the queries, keys and values read:
        to x, or to each head's copy of x while ``split_qkv_input`` is on (the copies are the pre-ln1
        residual stream, as TransformerLens' direct-path patching expects). ``hooked``: every hook point
        fires, q, k and v come from one fused product, and the output is z W_O + b_O (``hook_attn_out``'s).
        ``hooked=False`` (the training step; the last block when nothing hooks it): no hook point fires,
        q, k and v come from three products whose outputs are contiguous, so that neither the forward nor
        the backward copies (bench/RESULTS.md), the output is z W_O (``Block.attend`` adds b_O), and
        ``biases=False`` skips b_Q, b_K, b_V; given ``x_last``, the caller's slice ``x[:, -1]``, only the
        last position's query is computed, -> (B, D) (without ln1 it reads that slice, so that the
        backward sums into it as it always has).
        """
        B, T, D = x.shape
        H, Dh = self.W_Q.shape[0], self.W_Q.shape[2]
        last = x_last is not None
        if hooked and last:
            raise ValueError("Attention's last-position query is hook-free: a hook sees every position")
        if hooked and self.split_qkv_input:  # each head reads its own copy of x, so one head's input can be edited
            x_h = x[:, :, None, :].expand(B, T, H, D)
            q_in, k_in, v_in = self.hook_q_input(x_h), self.hook_k_input(x_h), self.hook_v_input(x_h)
            q_in, k_in, v_in = _norm(norm, q_in), _norm(norm, k_in), _norm(norm, v_in)
            q = self.hook_q(torch.einsum("bthd,hde->bthe", q_in, self.W_Q) + self.b_Q)
            k = self.hook_k(torch.einsum("bthd,hde->bthe", k_in, self.W_K) + self.b_K)
            v = self.hook_v(torch.einsum("bthd,hde->bthe", v_in, self.W_V) + self.b_V)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # each (B, H, T, Dh)
        elif hooked:  # one (D, 3·H·Dh) matmul rather than three: the same sums, markedly faster on CPU
            x = _norm(norm, x)
            W_qkv = torch.cat([self.W_Q, self.W_K, self.W_V], 0).permute(1, 0, 2).reshape(D, 3 * H * Dh)
            q, k, v = (x @ W_qkv).view(B, T, 3, H, Dh).unbind(2)  # each (B, T, H, Dh)
            q, k, v = self.hook_q(q + self.b_Q), self.hook_k(k + self.b_K), self.hook_v(v + self.b_V)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # each (B, H, T, Dh)
        else:
            x = _norm(norm, x, hooked=False)
            q_in = x if not last else x_last if norm is None else x[:, -1]
            q, k, v = (
                t @ W.permute(1, 0, 2).reshape(D, H * Dh) for t, W in ((q_in, self.W_Q), (x, self.W_K), (x, self.W_V))
            )
            if biases:
                q, k, v = q + self.b_Q.reshape(H * Dh), k + self.b_K.reshape(H * Dh), v + self.b_V.reshape(H * Dh)
            k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (k, v))  # each (B, H, T, Dh)
            q = q.view(B, H, 1, Dh) if last else q.view(B, T, H, Dh).transpose(1, 2)
        # Scores and softmax in fp32 whatever the autocast dtype, as CUDA autocast does.
        scores = (q @ k.transpose(-1, -2)).float() / self.scale  # (B, H, T, T), or (B, H, 1, T) with last
        if not last:  # the last query sees every key: nothing to mask
            scores = _fire(self.hook_attn_scores, scores.masked_fill(~self.mask[:T, :T], float("-inf")), hooked)
        pattern = _fire(self.hook_pattern, scores.softmax(dim=-1), hooked)
        z = pattern.to(v.dtype) @ v  # (B, H, T, Dh), or (B, H, 1, Dh) with last
        if last:
            return z.reshape(B, H * Dh) @ self.W_O.reshape(H * Dh, D)
        z = _fire(self.hook_z, z.transpose(1, 2), hooked)  # (B, T, H, Dh)
        out = z.reshape(B, T, H * Dh) @ self.W_O.reshape(H * Dh, D)
        return out + self.b_O if hooked else out


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
        self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_pre = HookPoint()  # (B, T, d_mlp)
        self.hook_post = HookPoint()

    def forward(self, x, hooked: bool = True, biases: bool = True):
        """relu(x W_in + b_in) W_out + b_out at any positions (..., D)."""
        pre = x @ self.W_in
        pre = _fire(self.hook_pre, pre + self.b_in if biases else pre, hooked)
        out = _fire(self.hook_post, F.relu(pre), hooked) @ self.W_out
        return out + self.b_out if biases else out


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.has_mlp = layer in cfg.mlp_layers
        # With ``layernorm``: ln1 before attention, ln2 before the MLP (in every block, as TransformerLens).
        self.ln1 = LayerNorm(cfg) if cfg.layernorm else None
        self.attn = Attention(cfg)
        self.ln2 = LayerNorm(cfg) if cfg.layernorm else None
        self.mlp = MLP(cfg)
        if not self.has_mlp:
            # Its weights exist (zero, frozen: SPEC §2.1) but it never runs, so its hook points are not
            # offered: a hook there would be silently ignored. (``hook_mlp_out`` stays: it fires, with 0.)
            del self.mlp.hook_pre, self.mlp.hook_post
            if self.ln2 is not None:
                del self.ln2.hook_scale, self.ln2.hook_normalized
        self.hook_resid_pre = HookPoint()  # (B, T, D)
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x, *, hooked: bool = True, biases: bool = True):
        """(B, T, D) -> (B, T, D): ``attend`` then ``mlp_tail``."""
        return self.mlp_tail(self.attend(x, hooked=hooked, biases=biases), hooked=hooked, biases=biases)

    def attend(self, x, *, hooked: bool = True, last: bool = False, biases: bool = True):
        """The attention stage, resid_pre (B, T, D) -> resid_mid: ln1, attention, the residual sum. Hooked,
        x + (z W_O + b_O) (``hook_attn_out`` sees the bracket); hook-free, (x + z W_O) + b_O, the sums
        the training path has always done. ``last``: resid_mid at the last position, (B, D)."""
        if hooked:
            x = self.hook_resid_pre(x)
            return self.hook_resid_mid(x + self.hook_attn_out(self.attn(x, self.ln1)))
        x_last = x[:, -1] if last else None
        resid = (x if x_last is None else x_last) + self.attn(x, self.ln1, hooked=False, x_last=x_last, biases=biases)
        return resid + self.attn.b_O if biases else resid

    def mlp_tail(self, resid_mid, *, hooked: bool = True, biases: bool = True):
        """The MLP stage, resid_mid -> resid_post at any positions (..., D): ln2, the MLP, the residual sum.
        A layer without MLP adds nothing: its weights are zero, so its output is exactly zero (hooked,
        ``hook_mlp_out`` still fires, with zeros)."""
        if not hooked:
            if not self.has_mlp:
                return resid_mid
            return resid_mid + self.mlp(_norm(self.ln2, resid_mid, hooked=False), hooked=False, biases=biases)
        mlp_out = self.mlp(_norm(self.ln2, resid_mid)) if self.has_mlp else torch.zeros_like(resid_mid)
        return self.hook_resid_post(resid_mid + self.hook_mlp_out(mlp_out))

    def last_hooked_stage(self) -> int:
        """Through which stage a forward must run this block in full, hooks firing: 0 when none of its hook
        points holds a hook, 1 when the last that does is in ``attend`` (resid_pre, ln1, attn, attn_out,
        resid_mid), 2 when one is in ``mlp_tail`` (ln2, mlp, mlp_out, resid_post)."""
        if _has_hooks(self.ln2, self.mlp, self.hook_mlp_out, self.hook_resid_post):
            return 2
        return int(_has_hooks(self.hook_resid_pre, self.ln1, self.attn, self.hook_attn_out, self.hook_resid_mid))


class Unembed(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab_out))

    def forward(self, x, biases: bool = True):
        out = x @ self.W_U
        return out + self.b_U if biases else out


class AssignAddTransformer(HookedRootModule):
    """The 2-layer, 1-head, attention-only-Layer-1 transformer of the paper, or a variant of it
    (``ModelConfig``: layers, heads, widths, MLP layers, LayerNorm, vocabulary)."""

    def __init__(self, cfg: ModelConfig | None = None, seed: int | None = None):
        super().__init__()
        self.cfg = cfg or ModelConfig()
        # The tokens enter through a hook point (as TransformerLens' ``hook_tokens``): anything that
        # needs the running batch (a knock-out's per-sequence positions) reads it there, whichever
        # entry point ran the forward (``__call__``, ``run_with_hooks``, nnsight).
        self.hook_tokens = HookPoint()  # (B, T) long
        self.embed = Embed(self.cfg)
        self.hook_embed = HookPoint()
        self.pos_embed = PosEmbed(self.cfg)
        self.hook_pos_embed = HookPoint()
        self.blocks = nn.ModuleList([Block(self.cfg, layer) for layer in range(self.cfg.n_layers)])
        self.ln_final = LayerNorm(self.cfg) if self.cfg.layernorm else None
        self.unembed = Unembed(self.cfg)
        self.init_weights(seed)
        self.freeze_structural_zeros()
        self.setup()

    def init_weights(self, seed: int | None = None):
        """TransformerLens' default for this config: every W_* ~ N(0, (0.8/sqrt(d_model))^2); biases
        and the MLP weights of MLP-less layers are zero; LayerNorm weights one, their biases zero."""
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        std = 0.8 / math.sqrt(self.cfg.d_model)
        with torch.no_grad():
            for name, p in self.named_parameters():
                leaf = name.rsplit(".", 1)[-1]
                if leaf.startswith("W_"):
                    p.copy_(torch.randn(p.shape, generator=gen) * std)
                elif leaf == "w":  # a LayerNorm's scale
                    p.fill_(1.0)
                else:
                    p.zero_()
            for block in self.blocks:
                if not block.has_mlp:
                    block.mlp.W_in.zero_()
                    block.mlp.W_out.zero_()

    def freeze_structural_zeros(self):
        """Biases and the MLP of MLP-less layers stay zero and untrained (SPEC §2.1); so does the ln2 of
        such a layer (it never runs). LayerNorm's own ``w`` and ``b`` are learned."""
        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            in_mlp = ".mlp." in name or ".ln2." in name
            layer_mlp_off = in_mlp and not self.blocks[int(name.split(".")[1])].has_mlp
            if leaf.startswith("b_") or layer_mlp_off:
                p.requires_grad_(False)

    @property
    def trainable_parameters(self):
        return [p for p in self.parameters() if p.requires_grad]

    def forward(
        self,
        tokens: torch.Tensor,
        stop_at_layer: int | None = None,
        *,
        last_only: bool = False,
        hooked: bool = True,
        biases: bool = True,
    ) -> torch.Tensor:
        """Logits at every position: (B, T) -> (B, T, d_vocab_out), fp32. The one forward.

        ``stop_at_layer=L`` (as TransformerLens) runs blocks 0..L-1 only and returns the residual
        stream (B, T, d_model): for measurements that read Layer 1 alone.

        ``last_only=True``: the caller reads the last position only; returns (B, 1, d_vocab_out). Every
        TransformerLens hook fires as in the full forward, with the same shapes; what no hook and no
        output reads is skipped (``_last_position``). The logits then equal the full forward's to float
        rounding (other matrix shapes), not to the bit. Hooks attached by other means (torch's own
        ``register_forward_hook``, an nnsight trace) are not seen: with them, leave ``last_only`` off
        (the interventions engine's nnsight backend does).

        ``hooked=False`` (the training step, ``training.fast_forward.last_logits``): no hook point fires,
        and each block's q, k and v come from three products (``Attention.forward``); ``biases=False``
        skips the bias terms there, for a caller that knows they are zero.
        """
        if hooked and not biases:
            raise ValueError("biases=False is for the hook-free forward (hooked=False)")
        if tokens.dim() == 1:  # one sequence, e.g. ``model(assignadd.parse(text))``
            tokens = tokens[None]
        if hooked:
            tokens = self.hook_tokens(tokens)
            x = self.hook_embed(self.embed(tokens)) + self.hook_pos_embed(self.pos_embed(tokens))
        else:  # the position table broadcast over the batch, as the training step has always added it
            x = self.embed(tokens) + self.pos_embed.W_pos[: tokens.shape[1]]
        last_only = last_only and stop_at_layer is None
        for block in self.blocks[: -1 if last_only else stop_at_layer]:
            x = block(x, hooked=hooked, biases=biases)
        if stop_at_layer is not None:
            return x
        if last_only:
            return self._last_position(x, hooked, biases)
        return self.unembed_tail(x, hooked=hooked, biases=biases)

    def _last_position(self, x: torch.Tensor, hooked: bool, biases: bool) -> torch.Tensor:
        """The last block and the unembedding for the last position's logits (B, 1, d_vocab_out).

        The block runs in full (every position, hooks firing) through its last stage whose hook points
        hold a hook (``Block.last_hooked_stage``), the rest at the last position alone, hook-free: with no
        hook in it, its query, attention output, MLP and unembedding run at the last position; with hooks
        no later than ``hook_resid_mid``, only the MLP and unembedding are cut; any later hook (or
        ``ln_final``'s, or ``split_qkv_input``) gets the full forward."""
        last = self.blocks[-1]
        full = last.last_hooked_stage() if hooked else 0
        if hooked and (last.attn.split_qkv_input or _has_hooks(self.ln_final)):
            full = 2  # per-head inputs are computed in full; ln_final's hook points see every position
        if full == 2:
            x = last(x)
            return self.unembed_tail(x)[:, -1:] if self.ln_final is not None else self.unembed_tail(x[:, -1])[:, None]
        resid_mid = last.attend(x)[:, -1] if full == 1 else last.attend(x, hooked=False, last=True, biases=biases)
        return self.logits_from_resid_mid(resid_mid, biases=biases)[:, None]

    def unembed_tail(self, x: torch.Tensor, *, hooked: bool = True, biases: bool = True) -> torch.Tensor:
        """The final LayerNorm (with ``layernorm``) and the unembedding, at any positions: (..., d_model) ->
        (..., d_vocab_out), fp32. ``hooked=False``: ln_final's hook points do not fire."""
        return self.unembed(_norm(self.ln_final, x, hooked), biases).float()

    def logits_from_resid_mid(self, resid_mid: torch.Tensor, *, biases: bool = True) -> torch.Tensor:
        """Everything after the last block's attention, hook-free, at any positions: its MLP stage and the
        unembedding, resid_mid (..., d_model) -> logits (..., d_vocab_out), fp32 (``last_only``'s cut
        forward; the interface checks at `=`)."""
        resid_post = self.blocks[-1].mlp_tail(resid_mid, hooked=False, biases=biases)
        return self.unembed_tail(resid_post, hooked=False, biases=biases)

    def biases_are_zero(self) -> bool:
        return all(not p.any() for n, p in self.named_parameters() if n.rsplit(".", 1)[-1].startswith("b_"))

    def run_with_cache(self, *args, **kwargs):
        """As TransformerLens', returning an ``ActivationCache`` (the base class returns a dict here)."""
        out, cache = super().run_with_cache(*args, **kwargs)
        if not isinstance(cache, ActivationCache):
            cache = ActivationCache(dict(cache), self)
        return out, cache

    # ----- the rest of TransformerLens' model surface: device, text and tokens, residual directions -----
    # ``transformer_lens.patching`` and ``ActivationCache`` call these (tests/test_tl_citizen.py checks
    # each against this package's own engine).
    def setup(self):
        """As TransformerLens' (names the modules, builds ``hook_dict``), then ``cfg.device`` from the weights."""
        super().setup()
        self._sync_cfg_device()

    def _apply(self, fn, *args, **kwargs):
        """Every move (``.to``, ``.cuda``, ``.cpu``) passes here: ``cfg.device`` keeps telling where the weights are."""
        out = super()._apply(fn, *args, **kwargs)
        self._sync_cfg_device()
        return out

    def _sync_cfg_device(self) -> None:
        device = str(self.embed.W_E.device)
        if self.cfg.device != device:
            self.cfg = replace(self.cfg, device=device)  # a copy: other models may share the old config

    @property
    def vocab(self):
        """The vocabulary of SPEC §1.1 that this model's shapes imply (modulus, number of variables)."""
        return Vocab(modulus=self.cfg.d_vocab_out, n_vars=self.cfg.n_vars)

    def to_tokens(
        self, input, prepend_bos: bool | None = None, padding_side: str | None = None, move_to_device: bool = True
    ) -> torch.Tensor:
        """Text (``"a=3 b=4 + b 5 ="``, the full 16-word form, or a list of either) or token ids -> a batch
        [B, 16] of token ids on the model's device, as TransformerLens' ``to_tokens``.

        Short texts get their PADs in front (``assignadd.data.parse``). There is no BOS token and no
        padding side: every sequence is 16 tokens, so ``prepend_bos=True`` and ``padding_side`` are refused.
        """
        if prepend_bos:
            raise ValueError("this model has no BOS token: a sequence is exactly 16 tokens (SPEC §1.2)")
        if padding_side is not None:
            raise ValueError("every sequence is 16 tokens, so there is no padding side to choose")
        tokens = to_tokens(input, self.vocab)
        return tokens.to(self.cfg.device) if move_to_device else tokens

    def to_str_tokens(self, input, prepend_bos: bool | None = None, padding_side: str | None = None):
        """The token words: one sequence (a text or [16] ids) gives a list of 16 strings, a batch
        (a list of texts or [B, 16] ids) a list of such lists."""
        single = isinstance(input, str) or getattr(input, "ndim", None) == 1
        words = [row.split() for row in render(self.to_tokens(input, prepend_bos, padding_side).cpu(), self.vocab)]
        return words[0] if single else words

    def to_string(self, tokens):
        """Token ids back to text: [16] gives a string, [B, 16] a list of strings (the full 16-word form)."""
        return render(tokens.cpu() if isinstance(tokens, torch.Tensor) else tokens, self.vocab)

    def to_single_token(self, string: str) -> int:
        """The id of one token word (``"27"``, ``"a"``, ``"+"``, ``"="``, ``"PAD"``)."""
        return self.vocab.token_id(string.strip())

    def tokens_to_residual_directions(self, tokens) -> torch.Tensor:
        """The unembedding directions W_U[:, t] of output classes t (the numbers 0..N-1): the
        residual-stream vector whose dot product is the logit of t, as TransformerLens' (read by
        ``ActivationCache.logit_attrs``). A word (``"27"``), an int, or a tensor of ids -> [..., d_model]."""
        if isinstance(tokens, str):
            tokens = self.to_single_token(tokens)
        ids = torch.as_tensor(tokens, device=self.unembed.W_U.device).long()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.cfg.d_vocab_out):
            raise ValueError(
                f"token ids must be output classes 0..{self.cfg.d_vocab_out - 1} (the numbers), got "
                f"{ids.unique().tolist()}"
            )
        return self.unembed.W_U[:, ids].movedim(0, -1)  # [..., d_model]

    def accumulated_bias(self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True) -> torch.Tensor:
        """The biases written into the residual stream before block ``layer`` (each b_O, and each computing
        MLP's b_out with ``include_mlp_biases``), plus block ``layer``'s own b_O for ``mlp_input``: the
        ``bias`` row of ``ActivationCache.get_full_resid_decomposition``. [d_model]"""
        total = torch.zeros(self.cfg.d_model, device=self.embed.W_E.device)
        for block in self.blocks[:layer]:
            total = total + block.attn.b_O
            if include_mlp_biases and block.has_mlp:
                total = total + block.mlp.b_out
        if mlp_input:
            total = total + self.blocks[layer].attn.b_O
        return total

    def set_use_split_qkv_input(self, use_split_qkv_input: bool) -> None:
        """TransformerLens' switch for per-head Q/K/V inputs: while on, every attention runs on per-head
        copies of its input through ``attn.hook_q_input`` / ``hook_k_input`` / ``hook_v_input`` (so
        ``transformer_lens.patching.get_act_patch_direct_path`` can edit one head's input), and the
        forward takes the general path (no last-position shortcut in the last block)."""
        for block in self.blocks:
            block.attn.split_qkv_input = bool(use_split_qkv_input)
