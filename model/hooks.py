"""Hook names (SPEC §2.3), built in one place, as TransformerLens' ``get_act_name`` does.

The sites the claims read (``PATTERN_1``, ``RESID_MID_2``, ...) are properties of
``model.components.Components``, built from where the components were found; the constants at the
bottom of this module are the paper's layout (``*_1`` is Layer 1, ``blocks.0``; ``*_2`` is Layer 2,
``blocks.1``), for scripts and tests that read the bundled reference.
"""

from __future__ import annotations

# per activation: its hook's name relative to the block (under ``attn.`` / ``mlp.`` where it lives there)
_BLOCK = {
    "resid_pre": "hook_resid_pre",
    "attn_out": "hook_attn_out",
    "resid_mid": "hook_resid_mid",
    "mlp_out": "hook_mlp_out",
    "resid_post": "hook_resid_post",
    "q": "attn.hook_q",
    "k": "attn.hook_k",
    "v": "attn.hook_v",
    "z": "attn.hook_z",
    "attn_scores": "attn.hook_attn_scores",
    "pattern": "attn.hook_pattern",
    "pre": "mlp.hook_pre",
    "post": "mlp.hook_post",
}


def act_name(name: str, layer: int) -> str:
    """The hook name of activation ``name`` (``"pattern"``, ``"resid_mid"``, ``"pre"``, ...) in block
    ``layer`` (0-based, as the code counts): ``act_name("pattern", 0)`` is ``"blocks.0.attn.hook_pattern"``."""
    if name not in _BLOCK:
        raise KeyError(f"unknown activation {name!r}; known: {', '.join(_BLOCK)}")
    return f"blocks.{int(layer)}.{_BLOCK[name]}"


# The paper's layout, the names ``Components.paper()`` gives (tests/test_locate.py checks they agree).
PATTERN_1, PATTERN_2 = act_name("pattern", 0), act_name("pattern", 1)
ATTN_OUT_1, ATTN_OUT_2 = act_name("attn_out", 0), act_name("attn_out", 1)
RESID_POST_1 = act_name("resid_post", 0)  # = Layer 2's input
RESID_PRE_2, RESID_MID_2 = act_name("resid_pre", 1), act_name("resid_mid", 1)
KEYS_2, VALUES_2 = act_name("k", 1), act_name("v", 1)
MLP_PRE_2 = act_name("pre", 1)
