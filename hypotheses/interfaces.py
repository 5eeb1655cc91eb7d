"""Interfaces between components: where one component's output is the next one's input, a break can sit
on either side, and one checkpoint cannot always say which.

If Layer 2's W_O is replaced by another matrix, what it writes is recoded; if the MLP's W_in is rotated,
what the MLP reads is recoded the other way. Both leave each side working in its own basis and the two
disagreeing: the answers fail, yet an affine recoding of what crosses the interface restores them. A
claim about the writer alone passes the first (its output still carries the numbers), a claim about the
reader alone may or may not see the second, and no measurement on one checkpoint can tell a writer that
changed its code from a reader that changed its own. So such a break is reported for what it is: an
**interface-broken** verdict between the two named claims, instead of a pass for the writer.

For each interface (a hook where the writer's output is read: at `=`, or at every position for Layer 1's
output, which Layer 2 reads everywhere), on 0-, 1- and 2-var training sequences (the model's own
task, so a healthy model answers them):

    plain    = share answered correctly, the model as it is (Clopper-Pearson interval)
    recoded  = share answered correctly when the writer's output a at the interface is replaced by
               a A + c, (A, c) fitted by L-BFGS (at most 100 iterations at `=`, 300 at Layer 1's
               output; from A = I and c = -mean(a)) to the
               cross-entropy of the answers on a fitting draw of its own, scored on the same sequences
               as plain

    interface-broken  recoded lower >= 0.9 and above plain's upper bound: the two sides disagree on the code
                      (fitted where plain < 0.98, below a trained model's answers, even if plain passes)
    intact            otherwise, plain lower >= 0.9
    not a recoding    both upper < 0.9: something is broken that no recoding here repairs (a claim of a
                      component says where; this interface is not the place)
    inconclusive      otherwise (an interval straddles 0.9)

``recoded`` is fitted only when ``plain`` falls short of 0.98, on one thread (small matrices: the same
result whatever the machine's thread count), from c = -mean(a) (from c = 0 a large constant offset can
leave the MLP's neurons in one regime, where the fit stalls). At Layer 1's output the answers are recomputed from that
layer's block input on through the model's own hook-free forward. Pools of 1,000 per training pool
whatever ``--n``; each interface's fit size (``Interface.fit_per_pool``) and iteration cap
(``LBFGS_ITERATIONS``), the bar, and the measurements on mutants of the reference and seeds that
registered them: docs/interfaces.md, "Why these numbers", and the re-registrations it lists.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model.components import Components
from ..model.hooks import act_name
from ..random_streams import torch_seed
from .base import Threshold, _r, rate
from .declaration import Interface

POOLS = ("0var_train", "1var_train", "2var_train")
POOL_SIZE = 1000  # sequences per pool, whatever the context's n: the bar is registered for these sizes
LBFGS_ITERATIONS = {"layer1_out": 300, "attn_out": 100, "mlp_out": 100}  # per interface output (docstring)
BAR = Threshold(
    0.9,
    ">=",
    "a healthy model answers its own training pools (reference 0.999); recodings of either side of an "
    "interface are restored to 0.939-1.000, breaks inside a component to at most 0.784 (2026-12-04); at "
    "Layer 1's output also Layer 2's attention scores rescaled, 0.96-0.99, which identity_qk fails (2026-12-07)",
)
TRAINED = Threshold(
    0.98,
    ">=",
    "a trained model answers its own training pools at >= 0.98: the final checkpoints of the paper's "
    "configuration 0.991-1.000 on each (checkpoints/SEEDS.md), the reference 0.999. Below it the recoding is "
    "fitted even where the answers pass BAR, and a significant restoration names the interface (2026-12-07)",
)


def declared() -> tuple[Interface, ...]:
    """Every registered claim's interfaces (``Hypothesis.interfaces``: its component's output and who reads
    it), in registry order, which is the order the model computes them: a break is localized to the last
    interface whose recoding restores the answers (``check_all``)."""
    from .base import REGISTRY

    return tuple(i for cls in REGISTRY.values() for i in cls.interfaces)


def _pool(ctx) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, labels = zip(*(ctx.pool(name, POOL_SIZE) for name in POOLS))
    return torch.cat(tokens), torch.cat(labels)


def _activations(model, tokens: torch.Tensor, components: Components) -> dict[str, torch.Tensor]:
    """{"layer1_in", "layer1_out": the previous-token head's layer's input and attention output (B, T,
    d_model); "mid", "attn_out",
    "mlp_out": at `=` (B, d_model), the adding MLP's input and the later interfaces' writer outputs;
    "answers": the logits at `=` (B, V)}, from one forward."""
    from ..interventions import run

    names = {
        "layer1_in": act_name("resid_pre", components.prev_layer),
        "layer1_out": components.ATTN_OUT_1,
        "mid": components.RESID_MID_2,
        "attn_out": components.ATTN_OUT_2,
        "mlp_out": components.MLP_OUT_2,
    }
    result = run(model, tokens, [], read=list(names.values()))
    every_position = ("layer1_in", "layer1_out")
    acts = {k: result.activations[h] if k in every_position else result.activations[h][:, -1] for k, h in names.items()}
    return acts | {"answers": result.logits[:, -1]}


def _split(acts: dict, interface: Interface) -> tuple[torch.Tensor, torch.Tensor]:
    """(what the rest of the model adds the writer's output to, the writer's output) at `=`: for the
    fetching layer's attention output, that layer's input there; for the MLP's output, the MLP's input."""
    a = acts[interface.output]
    return (acts["mid"] - a if interface.output == "attn_out" else acts["mid"]), a


def _logits(model, interface: Interface, base: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """The answers at `=` (B, V) from an interface at `=` on: everything after it there is position-wise
    (those interfaces sit in the last block, after its attention), and is the model's own hook-free tail:
    from the fetching layer's output, the last block's MLP stage and the unembedding; from the MLP's, the
    unembedding."""
    resid = base + a
    if interface.output == "attn_out":
        return model.logits_from_resid_mid(resid)
    return model.unembed_tail(resid, hooked=False)


def _fit_pool(ctx, interface: Interface) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequences the recoding is fitted on: ``interface.fit_per_pool`` of each training pool, a draw
    of its own (seeded apart from the scored pool), so that plain and recoded are scored on the same
    sequences and the fit's size does not take any from them."""
    seed = torch_seed(ctx.seed, f"interface {interface.name} fit pool")
    tokens, labels = zip(*(ctx.task.pool(name, interface.fit_per_pool, seed=seed) for name in POOLS))
    return torch.cat(tokens), torch.cat(labels)


def _logits_from_layer1(model, layer: int, resid_mid: torch.Tensor) -> torch.Tensor:
    """The answers at `=` (B, V) from the previous-token head's layer's resid_mid (B, T, d_model) on: the
    rest of that block, the blocks after it, and the last block at `=` alone, the model's own hook-free
    forward (the hooked one's sums to float rounding)."""
    x = model.blocks[layer].mlp_tail(resid_mid, hooked=False)
    for block in model.blocks[layer + 1 : -1]:
        x = block(x, hooked=False)
    return model.logits_from_resid_mid(model.blocks[-1].attend(x, hooked=False, last=True))


def recoded_accuracy(model, interface: Interface, fit: tuple, score: tuple, *, components: Components) -> torch.Tensor:
    """Correct (bool) on the scored sequences when the writer's output is recoded as a A + c (at `=`, or
    at every position for Layer 1's output), (A, c) fitted on the fitting sequences. ``fit`` and
    ``score``: (tokens, labels, ``_activations`` of the tokens)."""
    if interface.output == "layer1_out":  # everything after it depends on every position

        def logits(which, A, c):
            resid_mid = which[2]["layer1_in"] + which[2]["layer1_out"] @ A + c
            return _logits_from_layer1(model, components.prev_layer, resid_mid)

        start = -fit[2]["layer1_out"].mean((0, 1))
    else:

        def logits(which, A, c):
            base, a = _split(which[2], interface)
            return _logits(model, interface, base, a @ A + c)

        start = -_split(fit[2], interface)[1].mean(0)
    A = torch.eye(start.shape[-1], requires_grad=True)
    c = start.clone().requires_grad_(True)
    opt = torch.optim.LBFGS(
        [A, c], lr=1, max_iter=LBFGS_ITERATIONS[interface.output], history_size=20, line_search_fn="strong_wolfe"
    )

    def closure():  # gradients for A and c only: the model's own parameters are left untouched
        loss = F.cross_entropy(logits(fit, A, c), fit[1])
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
        return logits(score, A, c).argmax(-1) == score[1]


def _plain_logits(model, interface: Interface, acts: dict) -> torch.Tensor:
    """The answers as they are: the model's own at `=`, or recomputed from an interface at `=` on."""
    if interface.output == "layer1_out":
        return acts["answers"]
    return _logits(model, interface, *_split(acts, interface))


def check(ctx, interface: Interface, acts: dict | None = None) -> dict:
    """One interface on ``ctx.model``, on its own: {"interface", "writer", "reader", "reads", "hook",
    "verdict", "plain", "recoded" (None where not fitted), "bar", "reason"}. ``acts``: ``_activations`` of
    the pool, if at hand. Which of several restoring interfaces is the break: ``check_all``."""
    tokens, labels = _pool(ctx)
    model = ctx.model
    with torch.no_grad():
        acts = acts or _activations(model, tokens, ctx.components)
        plain = rate(_plain_logits(model, interface, acts).argmax(-1) == labels)
    recoded = None
    if plain.value < TRAINED.value:  # below a trained model's answers: a recoding may be what is wrong
        fit_tokens, fit_labels = _fit_pool(ctx, interface)
        with torch.no_grad():
            fit_acts = _activations(model, fit_tokens, ctx.components)
        fit = (fit_tokens, fit_labels, fit_acts)
        recoded = rate(recoded_accuracy(model, interface, fit, (tokens, labels, acts), components=ctx.components))
    # restored: the recoding reaches the bar and answers significantly more than the model as it is
    restored = recoded is not None and BAR.passes(recoded.low, recoded.high) and recoded.low > plain.high
    if restored:
        verdict = "interface-broken"
        reason = (
            f"the answers {_answers(plain)} ({plain.value:.3f}), and an affine recoding of what "
            f"{interface.reader_part} reads {interface.where} restores them ({recoded.value:.3f}): {interface.writer} "
            f"and {interface.reader or interface.reader_part} disagree about the code, and one checkpoint cannot "
            "tell which side changed"
        )
    elif BAR.passes(plain.low, plain.high):
        verdict, reason = "intact", f"the model answers its training pools ({plain.value:.3f})"
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
            "hook": f"{interface.hook(ctx.components)} {interface.where}",
            "verdict": verdict,
            "plain": plain.to_dict(),
            "recoded": None if recoded is None else recoded.to_dict(),
            "bar": BAR.value,
            "reason": reason,
        }
    )


def _answers(plain) -> str:
    return "fail" if plain.high < BAR.value else "fall short of a trained model's"


def _localized(checks: list[dict]) -> list[dict]:
    """``checks`` (in the model's order) with the break localized: of the interfaces whose recoding restores
    the answers, the last, unless an earlier one restores them significantly better than every later one
    (its recoded lower bound above their upper bounds). Each other interface whose answers fall short is
    ``upstream of the break`` before it, and one that restores them after it ``downstream of the break``."""
    restored = [k for k, c in enumerate(checks) if c["verdict"] == "interface-broken"]
    if not restored:
        return checks
    brk = restored[-1]
    for k in restored[:-1]:
        if all(checks[k]["recoded"]["ci"][0] > checks[j]["recoded"]["ci"][1] for j in restored if j > k):
            brk = k
            break
    name, out = checks[brk]["interface"], []
    for k, c in enumerate(checks):
        plain, recoded = c["plain"], c["recoded"]
        short = plain["value"] < TRAINED.value
        answers = "fail" if plain["ci"][1] < BAR.value else "fall short of a trained model's"
        if k < brk and short:
            also = f" (here {recoded['value']:.3f}, not more)" if k in restored else ""
            c = {
                **c,
                "verdict": "upstream of the break",
                "reason": f"the answers {answers} ({plain['value']:.3f}), and a recoding at the later interface {name} "
                f"restores them{also}: what crosses this one reaches {name}, where the break is",
            }
        elif k > brk and k in restored:
            c = {
                **c,
                "verdict": "downstream of the break",
                "reason": f"the answers {answers} ({plain['value']:.3f}); a recoding here restores them "
                f"({recoded['value']:.3f}), one at the earlier interface {name} restores them significantly more "
                f"({checks[brk]['recoded']['value']:.3f}): what is written there reaches here, and the break is there",
            }
        out.append(c)
    return out


def applicable(ctx, interface: Interface) -> bool:
    """Layer 1's output is recoded in the model's own forward: always. The checks at `=` recompute the
    answers from the interface on at `=` alone: they need the fetching head and the adding MLP in the last
    block (the paper's layout, and any variant that keeps it)."""
    try:
        c = ctx.components
    except ValueError:  # no candidate for some role: the claims report it
        return False
    if interface.output == "layer1_out":
        return c.prev_layer < c.fetch_layer
    last = ctx.model.cfg.n_layers - 1
    return c.fetch_layer == c.mlp_layer == last and ctx.model.blocks[last].has_mlp


def check_all(ctx, claims=None) -> list[dict] | None:
    """The ``declared`` interfaces on ``ctx.model`` that ``applicable`` allows, then those naming one
    of ``claims`` (when given); None where none is left.

    A break is localized over all of them (``_localized``): a recoding at an earlier interface can make up
    for a break at a later one (what Layer 1 writes reaches Layer 2's values, and so the MLP), and what a
    writer adds can reach a later interface unchanged (a constant, through the residual stream), so where
    several restore the answers, the last is the break unless an earlier one restores them significantly
    better."""
    every = [i for i in declared() if applicable(ctx, i)]
    chosen = {i.name for i in every if claims is None or {i.writer, i.reader} & set(claims)}
    if not chosen:
        return None
    with torch.no_grad():
        acts = _activations(ctx.model, _pool(ctx)[0], ctx.components)
    checks = _localized([check(ctx, interface, acts) for interface in every])
    return [c for c in checks if c["interface"] in chosen]


def broken_naming(checks: list[dict] | None, claim: str) -> str | None:
    """The first interface-broken check that names ``claim`` as writer or reader, or None."""
    for c in checks or []:
        if c["verdict"] == "interface-broken" and claim in (c["writer"], c["reader"]):
            return c["interface"]
    return None
