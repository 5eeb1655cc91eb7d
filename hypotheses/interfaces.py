"""Interfaces between components: where one component's output is the next one's input, a break can sit
on either side, and one checkpoint cannot always say which.

If Layer 2's W_O is replaced by another matrix, what it writes is recoded; if the MLP's W_in is rotated,
what the MLP reads is recoded the other way. Both leave each side working in its own basis and the two
disagreeing: the answers fail, yet an affine recoding of what crosses the interface restores them. A
claim about the writer alone passes the first (its output still carries the numbers), a claim about the
reader alone may or may not see the second, and no measurement on one checkpoint can tell a writer that
changed its code from a reader that changed its own. So such a break is reported for what it is: an
**interface-broken** verdict between the two named claims, instead of a pass for the writer.

For each interface (a hook where the writer's output is read, at `=`), on 0-, 1- and 2-var training
sequences (the model's own task, so a healthy model answers them):

    plain    = share answered correctly, the model as it is (Clopper-Pearson interval)
    recoded  = share answered correctly when the writer's output a at the interface is replaced by
               a A + c, (A, c) fitted by L-BFGS (100 iterations, from A = I and c = -mean(a)) to the
               cross-entropy of the answers on a seeded fitting set, scored on the other sequences

    intact            plain lower >= 0.9
    interface-broken  plain upper < 0.9 and recoded lower >= 0.9: the two sides disagree on the code
    not a recoding    both upper < 0.9: something is broken that no recoding here repairs (a claim of a
                      component says where; this interface is not the place)
    inconclusive      otherwise (an interval straddles 0.9)

``recoded`` is fitted only when ``plain`` fails. The bar 0.9 and the fit are registered from these
measurements on the bundled reference (pools of 1,000, 300 of each fitted, 2026-12-04;
``tests/test_interfaces.py``): unbroken, plain 0.999 at both interfaces. Recodings are restored: at
Layer 2's attention output, W_O replaced by a random matrix of the same spectrum 0.939, the value bias
shifted 1.000, the MLP's input rotated 0.947; at the MLP's output, its W_out rotated 1.000, the
unembedding's input rotated 0.994 (all from 0.003-0.027). Breaks inside a component are not: at most
0.784 (the Layer-2 neurons' inputs shuffled, at the MLP's output; 0.39 at its input), OV_2 cut to rank 8
0.34, Layer 2's values rotated on their input side 0.50, the key frequencies removed from the MLP's
input 0.63, Layer-1 and Layer-2 attention breaks 0.13-0.47. The starting point c = -mean(a) matters:
from c = 0 a large constant offset leaves the MLP's neurons in one regime and the fit stalls (0.28).
The fit runs on one thread (small matrices; the same result whatever the machine's thread count).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..model.components import Components
from ..random_streams import torch_generator
from .base import Threshold, _r, rate

POOLS = ("0var_train", "1var_train", "2var_train")
POOL_SIZE = 1000  # sequences per pool (at most the context's n)
FIT_PER_POOL = 300  # of which the recoding is fitted on these; the rest score it
LBFGS_ITERATIONS = 100
BAR = Threshold(
    0.9,
    ">=",
    "a healthy model answers its own training pools (reference 0.999); recodings of either side of an "
    "interface are restored to 0.939-1.000, breaks inside a component to at most 0.784 (2026-12-04)",
)


@dataclass(frozen=True)
class Interface:
    name: str
    writer: str  # the claim about the component that writes
    reader: str  # the claim about the component that reads ("" where no claim owns it, e.g. the unembedding)
    reader_part: str  # the reading component, in words
    output: str  # the writer's output, read at `=`: "attn_out" (the fetching head's layer) or "mlp_out"

    def hook(self, components: Components) -> str:
        """Where the writer's output is read, at the located components (SPEC §2.1)."""
        return components.ATTN_OUT_2 if self.output == "attn_out" else components.MLP_OUT_2


INTERFACES = (
    Interface("ov2_to_mlp", "shared_residual", "fourier_neurons", "the adding MLP", "attn_out"),
    Interface("mlp_to_unembedding", "fourier_neurons", "", "the unembedding", "mlp_out"),
)


def _pool(ctx) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, labels = zip(*(ctx.pool(name, min(ctx.n, POOL_SIZE)) for name in POOLS))
    return torch.cat(tokens), torch.cat(labels)


def _at_eq(model, tokens: torch.Tensor, components: Components) -> dict[str, torch.Tensor]:
    """{"mid", "attn_out", "mlp_out": activation at `=` (B, d_model)}: the adding MLP's input and both
    interfaces' writer outputs, from one forward."""
    from ..interventions import run

    names = {"mid": components.RESID_MID_2, "attn_out": components.ATTN_OUT_2, "mlp_out": components.MLP_OUT_2}
    acts = run(model, tokens, [], read=list(names.values())).activations
    return {k: acts[h][:, -1] for k, h in names.items()}


def _split(acts: dict, interface: Interface) -> tuple[torch.Tensor, torch.Tensor]:
    """(what the rest of the model adds the writer's output to, the writer's output) at `=`: for the
    fetching layer's attention output, that layer's input there; for the MLP's output, the MLP's input."""
    a = acts[interface.output]
    return (acts["mid"] - a if interface.output == "attn_out" else acts["mid"]), a


def _logits(model, interface: Interface, base: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The answers at `=` (B, V) from the interface on: everything after it there is position-wise (the
    interfaces sit in the last block, after its attention)."""
    from ..model.transformer import layer_norm_unhooked, mlp_unhooked

    block = model.blocks[-1]
    resid = base + a
    if interface.output == "attn_out" and block.has_mlp:
        resid = resid + mlp_unhooked(block.mlp, layer_norm_unhooked(block.ln2, resid))
    return layer_norm_unhooked(model.ln_final, resid) @ model.unembed.W_U + model.unembed.b_U


def recoded_accuracy(model, interface: Interface, acts: dict, labels, *, seed: int) -> torch.Tensor:
    """Correct (bool) on the scoring rows when the writer's output at `=` is recoded as a A + c, (A, c)
    fitted on ``FIT_PER_POOL`` seeded rows per pool (the rest score it)."""
    n_pool = len(labels) // len(POOLS)
    gen = torch_generator(seed, f"interface {interface.name} fit rows")
    fit = torch.zeros(len(labels), dtype=torch.bool)
    for i in range(len(POOLS)):
        fit[i * n_pool + torch.randperm(n_pool, generator=gen)[: min(FIT_PER_POOL, n_pool // 2)]] = True
    base, a = _split(acts, interface)
    A = torch.eye(a.shape[-1], requires_grad=True)
    c = (-a[fit].mean(0)).clone().requires_grad_(True)
    opt = torch.optim.LBFGS([A, c], lr=1, max_iter=LBFGS_ITERATIONS, history_size=20, line_search_fn="strong_wolfe")

    def closure():  # gradients for A and c only: the model's own parameters are left untouched
        loss = F.cross_entropy(_logits(model, interface, base[fit], a[fit] @ A + c), labels[fit])
        A.grad, c.grad = torch.autograd.grad(loss, [A, c])
        return loss

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is faster on a busy machine, and the same on any
    try:
        with torch.enable_grad():
            opt.step(closure)
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        return _logits(model, interface, base[~fit], a[~fit] @ A + c).argmax(-1) == labels[~fit]


def check(ctx, interface: Interface, acts: dict | None = None) -> dict:
    """One interface on ``ctx.model``: {"interface", "writer", "reader", "reads", "hook", "verdict", "plain",
    "recoded" (None where not fitted), "bar", "reason"}. ``acts``: ``_at_eq`` of the pool, if at hand."""
    tokens, labels = _pool(ctx)
    model = ctx.model
    with torch.no_grad():
        acts = acts or _at_eq(model, tokens, ctx.components)
        plain = rate(_logits(model, interface, *_split(acts, interface)).argmax(-1) == labels)
    recoded = None
    if plain.high < BAR.value:
        recoded = rate(recoded_accuracy(model, interface, acts, labels, seed=ctx.seed))
    if BAR.passes(plain.low, plain.high):
        verdict, reason = "intact", f"the model answers its training pools ({plain.value:.3f})"
    elif plain.high < BAR.value and recoded is not None and BAR.passes(recoded.low, recoded.high):
        verdict = "interface-broken"
        reason = (
            f"the answers fail ({plain.value:.3f}), and an affine recoding of what {interface.reader_part} reads at "
            f"`=` restores them ({recoded.value:.3f}): {interface.writer} and {interface.reader or interface.reader_part} "
            "disagree about the code, and one checkpoint cannot tell which side changed"
        )
    elif plain.high < BAR.value and recoded is not None and recoded.high < BAR.value:
        verdict = "not a recoding"
        reason = (
            f"the answers fail ({plain.value:.3f}) and no affine recoding here restores them ({recoded.value:.3f}): "
            "the break is not at this interface"
        )
    else:
        verdict, reason = "inconclusive", "an interval straddles the bar"
    return _r(
        {
            "interface": interface.name,
            "writer": interface.writer,
            "reader": interface.reader or None,  # None: no claim owns the reading component
            "reads": interface.reader_part,
            "hook": f"{interface.hook(ctx.components)} at `=`",
            "verdict": verdict,
            "plain": plain.to_dict(),
            "recoded": None if recoded is None else recoded.to_dict(),
            "bar": BAR.value,
            "reason": reason,
        }
    )


def applicable(ctx) -> bool:
    """The checks recompute the answers from the interface on at `=` alone: they need the fetching head
    and the adding MLP in the last block (the paper's layout, and any variant that keeps it)."""
    try:
        c = ctx.components
    except ValueError:  # no candidate for some role: the claims report it
        return False
    last = ctx.model.cfg.n_layers - 1
    return c.fetch_layer == c.mlp_layer == last and ctx.model.blocks[last].has_mlp


def check_all(ctx, claims=None) -> list[dict] | None:
    """The interfaces of ``INTERFACES`` on ``ctx.model`` (those naming one of ``claims``, when given),
    from one forward of the pools; None where ``applicable`` says the checks cannot be made, or none is
    asked for."""
    chosen = [i for i in INTERFACES if claims is None or {i.writer, i.reader} & set(claims)]
    if not chosen or not applicable(ctx):
        return None
    with torch.no_grad():
        acts = _at_eq(ctx.model, _pool(ctx)[0], ctx.components)
    return [check(ctx, i, acts) for i in chosen]


def broken_naming(checks: list[dict] | None, claim: str) -> str | None:
    """The first interface-broken check that names ``claim`` as writer or reader, or None."""
    for c in checks or []:
        if c["verdict"] == "interface-broken" and claim in (c["writer"], c["reader"]):
            return c["interface"]
    return None
