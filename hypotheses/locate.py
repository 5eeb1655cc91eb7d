"""Finding the circuit's components in a model: which head is the previous-token head, which head `=`
uses to fetch the operand values, which MLP adds them (SPEC §2.1).

The claims of §4 are about roles, not about ``blocks.0`` and ``blocks.1``: on a variant (more heads, more
layers) a role may sit elsewhere. Each role is found by a search fixed before any variant was looked at,
on the first ``LOCATE_SIZE`` sequences of the context's own training pools (one hooked forward, plus one
per candidate MLP; no random draw), in this order, each reading the one before:

    previous-token head  heads in layers 0 .. n_layers - 2; score = mean A[t, t - 1] over the value
                         tokens t of 1- and 2-var sequences; then heads of its layer join it in
                         the `=` row while that row's mean weight on the operand slot it reads less
                         is below ``EVEN`` of the other's (``_joined``, heads live at the `=` rows)
    fetching head        heads in later layers; score = mean A[15, s_1] + A[15, s_2], s_1, s_2 the
                         operand sources (``data.operand_sources``), over 0-, 1- and 2-var sequences;
                         then heads of the same layer join it while the role's mean weight on the
                         operand it fetches less is below ``EVEN`` of the other's (``_joined``)
    adding MLP           MLP layers at or after the fetching head's; score = share of answers at `=`
                         that change when that MLP's output at `=` is mean-ablated

A head writing less than ``SILENT_SHARE`` of the largest head's mean output norm at the rows read is no
candidate, unless every candidate is. The highest score wins, ties to the lowest site; on the paper's
configuration every role has one candidate, its site. The rules in full and what each role reports:
docs/spec.md §2.1. ``given`` pins the components instead (``assignadd-verify --components``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data import POS_EQ, operand_sources, value_positions
from ..data.tokens import POS_LHS, POS_RHS
from ..model.components import Components
from ..model.hooks import act_name
from .declaration import ROLES

LOCATE_SIZE = 256  # sequences taken from the start of each pool the search reads
# A fetching role is one head when its mean weight on the operand it fetches less is at least a third of
# its weight on the other (identity_qk's bar for `=` fetching both operands evenly); below that, heads of
# its layer join it (the role's weights are the mean of its heads').
EVEN = 1 / 3
SILENT_SHARE = 0.01  # a head writing < 1% of the largest head's mean norm at the rows read writes nothing
POOLS = {"previous_token_head": ("1var_train", "2var_train"), "other": ("0var_train", "1var_train", "2var_train")}


class LocateError(ValueError):
    """A role has no candidate in this model (e.g. one layer only, or no MLP after the fetching head)."""


@dataclass(frozen=True)
class Role:
    """What the search found for one role. ``found`` and ``runner_up`` are (layer, head) for a head,
    (layer,) for an MLP."""

    role: str
    found: tuple
    score: float | None
    runner_up: tuple | None
    runner_up_score: float | None
    candidates: int
    silent: int  # heads that were left out because they write nothing at the rows read
    how: str  # "searched" or "given"
    also: tuple = ()  # further heads of ``found``'s layer that fill the role with it (``_joined``)

    def to_dict(self) -> dict:
        def name(site):
            return None if site is None else ".".join(str(i) for i in site)

        def r(x):
            return None if x is None else round(float(x), 6)

        out = {
            "found": name(self.found),
            "score": r(self.score),
            "runner_up": name(self.runner_up),
            "runner_up_score": r(self.runner_up_score),
            "candidates": self.candidates,
            "silent_heads": self.silent,
            "how": self.how,
        }
        if self.also:  # a role filled by one head reports exactly what it always did
            out["also"] = [name(site) for site in self.also]
        return out


@dataclass(frozen=True)
class Located:
    """The components of one model, and how each was found."""

    components: Components
    roles: dict  # role name -> Role, in ``ROLES`` order

    @property
    def given(self) -> bool:
        return any(r.how == "given" for r in self.roles.values())

    @property
    def reported(self) -> bool:
        """Whether a report names the components: anything but the paper's layout with one candidate per
        role, found by the search (the report of the paper's model is then exactly what it always was)."""
        single = all(r.candidates == 1 for r in self.roles.values())
        return self.given or not (single and self.components.is_paper)

    def to_dict(self) -> dict:
        return {role: self.roles[role].to_dict() for role in ROLES}


def _ranked(scores: dict) -> list:
    """Candidates best first: highest score, ties to the lowest site."""
    return sorted(scores, key=lambda site: (-scores[site], site))


def _role(role: str, scores: dict, silent: int) -> Role:
    if not scores:
        raise LocateError(f"no candidate for the {role.replace('_', ' ')} in this model")
    best, *rest = _ranked(scores)
    second = rest[0] if rest else None
    second_score = None if second is None else scores[second]
    return Role(role, best, scores[best], second, second_score, len(scores), silent, "searched")


def _joined(found: tuple, each: dict, live) -> tuple:
    """The heads of ``found``'s layer that join it in the fetching role: while the role's mean weight on
    the operand it fetches less is below ``EVEN`` of the other's, the live head (``live``) that raises
    that weight most joins (ties to the lowest head), as long as one raises it. ``each``: {site: (mean
    weight on the left operand's source, on the right one's)}. Returns the joined sites, in order."""
    chosen = [found]

    def weaker_and_stronger(sites):
        left = sum(each[x][0] for x in sites) / len(sites)
        right = sum(each[x][1] for x in sites) / len(sites)
        return min(left, right), max(left, right)

    while True:
        weaker, stronger = weaker_and_stronger(chosen)
        if weaker >= EVEN * stronger:
            break
        options = [x for x in live if x[0] == found[0] and x not in chosen]
        if not options:
            break
        best = max(options, key=lambda x: (weaker_and_stronger(chosen + [x])[0], -x[1]))
        if weaker_and_stronger(chosen + [best])[0] <= weaker:
            break
        chosen.append(best)
    return tuple(chosen[1:])


def _head_writes(model, z: dict, rows) -> dict:
    """Mean ||z_h W_O^h|| at ``rows`` (an index into (B, T)) for every head: {(layer, head): float}."""
    out = {}
    for layer, zl in z.items():
        W_O = model.blocks[layer].attn.W_O.detach().double()  # (H, d_head, d_model)
        at = zl[rows].double()  # (K, H, d_head)
        writes = torch.einsum("khd,hde->khe", at, W_O).norm(dim=-1).mean(0)  # (H,)
        out.update({(layer, h): float(writes[h]) for h in range(len(writes))})
    return out


def _without_silent(scores: dict, writes: dict) -> tuple[dict, int]:
    """(the candidates of ``scores`` that write, how many were left out as silent): a head writing less
    than ``SILENT_SHARE`` of the largest head's mean norm (``writes``, every head of the model) is left
    out, unless every candidate is (then none is)."""
    top = max(writes.values(), default=0.0)
    live = {site: v for site, v in scores.items() if top > 0 and writes[site] >= SILENT_SHARE * top}
    if not live:
        return scores, 0
    return live, len(scores) - len(live)


@torch.no_grad()
def locate(model, assignments: torch.Tensor, mixed: torch.Tensor) -> Located:
    """The three searches of the module docstring on ``model``. ``assignments``: 1-var and 2-var training
    sequences (B1, T); ``mixed``: 0-, 1- and 2-var training sequences (B2, T)."""
    from ..interventions import Mean, Site, capture, run

    cfg = model.cfg
    layers = range(cfg.n_layers)
    names = [act_name(k, layer) for layer in layers for k in ("pattern", "z")]
    acts = {"assignments": capture(model, assignments, names), "mixed": capture(model, mixed, names)}

    # previous-token head: value token t -> its variable token t - 1
    vals = value_positions(assignments, model.vocab)
    b, t = vals.nonzero(as_tuple=True)
    a = acts["assignments"]
    writes = _head_writes(model, {layer: a[act_name("z", layer)] for layer in layers}, (b, t))
    scores = {}
    for layer in range(cfg.n_layers - 1):
        weight = a[act_name("pattern", layer)][b, :, t, t - 1].double().mean(0)  # (H,)
        scores.update({(layer, h): float(weight[h]) for h in range(cfg.n_heads)})
    prev = _role("previous_token_head", *_without_silent(scores, writes))

    m = acts["mixed"]
    src = operand_sources(mixed, model.vocab)
    ok = (src >= 0).all(1)
    rows = ok.nonzero().squeeze(1)
    eq_rows = (rows, torch.full_like(rows, POS_EQ))
    writes = _head_writes(model, {layer: m[act_name("z", layer)] for layer in layers}, eq_rows)

    # the previous-token role's `=` row: heads of its layer join it while it reads one operand slot
    # much more than the other (``_joined``, on the slots 13 and 14; live at the `=` rows)
    layer = prev.found[0]
    eq = m[act_name("pattern", layer)][rows, :, POS_EQ].double()  # (K, H, T)
    on_slots = {
        (layer, h): (float(eq[:, h, POS_LHS].mean()), float(eq[:, h, POS_RHS].mean())) for h in range(cfg.n_heads)
    }
    heads = {site: sum(w) for site, w in on_slots.items()}
    prev_also = _joined(prev.found, on_slots, _without_silent(heads, writes)[0])
    if prev_also:
        prev = Role(**{**vars(prev), "also": prev_also})

    # fetching head: `=` -> the two operand sources
    scores, each = {}, {}
    for layer in range(prev.found[0] + 1, cfg.n_layers):
        eq = m[act_name("pattern", layer)][rows, :, POS_EQ].double()  # (K, H, T)
        s = src[rows]
        on_each = eq.gather(2, s[:, None, :].expand(-1, eq.shape[1], -1))  # (K, H, 2)
        on = on_each.sum(-1).mean(0)  # (H,)
        scores.update({(layer, h): float(on[h]) for h in range(cfg.n_heads)})
        each.update({(layer, h): tuple(float(w) for w in on_each[:, h].mean(0)) for h in range(cfg.n_heads)})
    live, silent = _without_silent(scores, writes)
    fetch = _role("fetching_head", live, silent)
    also = _joined(fetch.found, each, live)
    if also:
        fetch = Role(**{**vars(fetch), "also": also})

    # adding MLP: mean-ablate its output at `=`; how many answers change?
    clean = run(model, mixed, [], last_only=True).last_logits.argmax(-1)
    scores = {}
    for layer in sorted(cfg.mlp_layers):
        if layer < fetch.found[0]:
            continue
        ablated = run(model, mixed, [Mean(Site(act_name("mlp_out", layer), positions=POS_EQ), mixed)], last_only=True)
        scores[(layer,)] = float((ablated.last_logits.argmax(-1) != clean).double().mean())
    mlp = _role("adding_mlp", scores, 0)

    components = Components(
        prev.found[0],
        prev.found[1],
        fetch.found[0],
        fetch.found[1],
        mlp.found[0],
        tuple(h for _, h in fetch.also),
        tuple(h for _, h in prev.also),
    )
    return Located(components, {"previous_token_head": prev, "fetching_head": fetch, "adding_mlp": mlp})


def search_pools(ctx) -> tuple[torch.Tensor, torch.Tensor]:
    """(assignments, mixed) from ``ctx``'s pools: the first ``LOCATE_SIZE`` sequences of each."""
    assignments = torch.cat([ctx.pool(p)[0][:LOCATE_SIZE] for p in POOLS["previous_token_head"]])
    mixed = torch.cat([ctx.pool(p)[0][:LOCATE_SIZE] for p in POOLS["other"]])
    return assignments, mixed


def given(components: Components, model=None) -> Located:
    """``components`` pinned by the user, checked against ``model`` (when given); raises ``ValueError``
    (one line)."""
    if model is not None:
        check(components, model.cfg)
    roles = {
        "previous_token_head": (components.prev_layer, components.prev_head),
        "fetching_head": (components.fetch_layer, components.fetch_head),
        "adding_mlp": (components.mlp_layer,),
    }
    also = {
        "previous_token_head": tuple((components.prev_layer, h) for h in components.prev_eq_also),
        "fetching_head": tuple((components.fetch_layer, h) for h in components.fetch_also),
    }
    return Located(
        components, {r: Role(r, site, None, None, None, 1, 0, "given", also.get(r, ())) for r, site in roles.items()}
    )


def check(components: Components, cfg) -> None:
    """Refuse components this model cannot have, with one line."""
    c = components
    for what, layer, head in (("prev", c.prev_layer, c.prev_head), ("fetch", c.fetch_layer, c.fetch_head)):
        if not (0 <= layer < cfg.n_layers and 0 <= head < cfg.n_heads):
            raise ValueError(
                f"{what}={layer}.{head}: the model has {cfg.n_layers} layers of {cfg.n_heads} heads (0-based)"
            )
    for what, layer, heads in (("prev", c.prev_layer, c.prev_eq_heads), ("fetch", c.fetch_layer, c.fetch_heads)):
        for i, head in enumerate(heads[1:], 1):
            if not 0 <= head < cfg.n_heads or head in heads[:i]:
                raise ValueError(f"{what}={layer}.{head}: not a further head of the model's {cfg.n_heads} heads")
    if not c.prev_layer < c.fetch_layer:
        raise ValueError(f"fetch={c.fetch_layer}.{c.fetch_head} must be in a layer after prev={c.prev_layer}")
    if c.mlp_layer not in cfg.mlp_layers or c.mlp_layer < c.fetch_layer:
        raise ValueError(
            f"mlp={c.mlp_layer}: must be a layer with an MLP ({', '.join(map(str, cfg.mlp_layers)) or 'none'}) "
            f"at or after fetch's layer {c.fetch_layer}"
        )
