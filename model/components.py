"""Where the circuit's components sit in a model: the record the claims and the mutants read their
hook names, head indices and weights from (SPEC §2.1).

The paper's model has one head per layer and two layers, so its components are fixed: Layer 1's head
(``blocks.0`` head 0) is the previous-token head, Layer 2's head (``blocks.1`` head 0) is the head `=`
uses to fetch the operands' values, and Layer 2's MLP (``blocks.1.mlp``) adds them. On a variant the
same roles may sit elsewhere; ``hypotheses.locate`` finds them by a pre-registered search and hands the
claims a ``Components``. Every hook name below is built from the record, so on the paper's layout each
is exactly the string the claims always read (``blocks.0.attn.hook_pattern``, ...).

Known limit: ``ATTN_OUT_1`` and ``ATTN_OUT_2`` are a layer's whole attention output (``hook_attn_out``).
On a layer with several heads that includes the other heads' writes; the items that read it (the
identity probe, the swaps, the scrubs) then see the layer, not the head alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from .hooks import act_name


@dataclass(frozen=True)
class Components:
    """The layer (and head) of each role, counted from 0 as the code counts.

    prev_layer, prev_head    the previous-token head (the paper's Layer 1 head)
    fetch_layer, fetch_head  the head `=` uses to fetch the operand values (the paper's Layer 2 head)
    mlp_layer                the MLP that adds them (the paper's Layer 2 MLP)
    fetch_also               further heads of ``fetch_layer`` that fetch with ``fetch_head`` (a role
                             split between heads, ``hypotheses.locate``); empty on the paper's layout
    prev_eq_also             further heads of ``prev_layer`` that read the operand slots from `=` with
                             ``prev_head`` (the previous-token role's `=` row split between heads)
    """

    prev_layer: int
    prev_head: int
    fetch_layer: int
    fetch_head: int
    mlp_layer: int
    fetch_also: tuple[int, ...] = ()
    prev_eq_also: tuple[int, ...] = ()

    @property
    def prev_eq_heads(self) -> tuple[int, ...]:
        """Every head of the previous-token role's `=` row, ``prev_head`` first."""
        return (self.prev_head, *self.prev_eq_also)

    @property
    def fetch_heads(self) -> tuple[int, ...]:
        """Every head of the fetching role, ``fetch_head`` first."""
        return (self.fetch_head, *self.fetch_also)

    @classmethod
    def paper(cls) -> "Components":
        """The paper's layout: (0, 0), (1, 0), MLP 1."""
        return cls(0, 0, 1, 0, 1)

    @classmethod
    def parse(cls, text: str) -> "Components":
        """``"prev=L.H,fetch=L.H,mlp=L"`` -> Components; raises ``ValueError`` with one line. A role split
        between heads of one layer is written with ``+``: ``fetch=1.0+1.1`` (the first head first), and
        for ``prev`` the further heads of its `=` row."""
        expected = "expected prev=L.H,fetch=L.H,mlp=L"
        found = {}
        for part in text.split(","):
            key, eq, value = part.strip().partition("=")
            if not eq or key not in ("prev", "fetch", "mlp"):
                raise ValueError(f"--components: {expected}, got {text!r}")
            if key == "mlp":
                if not value.isdigit():
                    raise ValueError(f"--components: mlp must be L (a non-negative integer), got {value!r}")
                found[key] = int(value)
                continue
            sites = [site.split(".") for site in value.split("+")]
            if not all(len(site) == 2 and all(n.isdigit() for n in site) for site in sites):
                raise ValueError(
                    f"--components: {key} must be L.H or L.H+L.H... (non-negative integers), got {value!r}"
                )
            if len({site[0] for site in sites}) > 1:
                raise ValueError(f"--components: {key}={value}: the heads of one role must share a layer")
            found[key] = (int(sites[0][0]), [int(site[1]) for site in sites])
        missing = [k for k in ("prev", "fetch", "mlp") if k not in found]
        if missing:
            raise ValueError(f"--components: missing {', '.join(missing)} ({expected})")
        (prev_layer, prev), (fetch_layer, fetch) = found["prev"], found["fetch"]
        return cls(prev_layer, prev[0], fetch_layer, fetch[0], found["mlp"], tuple(fetch[1:]), tuple(prev[1:]))

    @property
    def is_paper(self) -> bool:
        return self == Components.paper()

    def labels(self) -> dict[str, str]:
        """Each role as people write it: {"previous_token_head": "0.0", "fetching_head": "1.0", "adding_mlp": "1"}."""
        return {
            "previous_token_head": "+".join(f"{self.prev_layer}.{h}" for h in self.prev_eq_heads),
            "fetching_head": "+".join(f"{self.fetch_layer}.{h}" for h in self.fetch_heads),
            "adding_mlp": f"{self.mlp_layer}",
        }

    # ----- the previous-token head's layer -------------------------------------------------------------
    @property
    def PATTERN_1(self) -> str:
        """Its layer's attention pattern (B, H, T, T); the head is ``prev_head``."""
        return act_name("pattern", self.prev_layer)

    @property
    def ATTN_OUT_1(self) -> str:
        """Its layer's attention output (B, T, d_model): all of the layer's heads (see the module's limit)."""
        return act_name("attn_out", self.prev_layer)

    # ----- what the fetching layer reads, and the fetching head's layer --------------------------------
    @property
    def RESID_POST_1(self) -> str:
        """The residual stream the fetching layer reads: the output of the layer before it."""
        return act_name("resid_post", self.fetch_layer - 1)

    @property
    def RESID_PRE_2(self) -> str:
        return act_name("resid_pre", self.fetch_layer)

    @property
    def PATTERN_2(self) -> str:
        return act_name("pattern", self.fetch_layer)

    @property
    def KEYS_2(self) -> str:
        return act_name("k", self.fetch_layer)

    @property
    def VALUES_2(self) -> str:
        return act_name("v", self.fetch_layer)

    @property
    def ATTN_OUT_2(self) -> str:
        return act_name("attn_out", self.fetch_layer)

    # ----- the adding MLP's layer ----------------------------------------------------------------------
    @property
    def RESID_MID_2(self) -> str:
        """The adding MLP's input."""
        return act_name("resid_mid", self.mlp_layer)

    @property
    def MLP_PRE_2(self) -> str:
        return act_name("pre", self.mlp_layer)

    @property
    def MLP_OUT_2(self) -> str:
        return act_name("mlp_out", self.mlp_layer)

    # ----- text for the claims' declared sites ---------------------------------------------------------
    @property
    def layer1(self) -> str:
        return f"blocks.{self.prev_layer}"

    @property
    def layer2(self) -> str:
        return f"blocks.{self.fetch_layer}"

    @property
    def mlp(self) -> str:
        return f"blocks.{self.mlp_layer}.mlp"


PAPER = Components.paper()
