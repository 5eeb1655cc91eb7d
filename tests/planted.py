"""Planted models: hand-set weights that solve the task by the paper's mechanism, exactly, and
variants that break one part of it by construction ("hypotheses are also run on hand-set
tiny weights where the claim is true or false by construction").

No training: every weight below is written down from the mechanism of SPEC §4.1-§4.3, so each model
generalizes to held-out pairs and restricted slots by construction (nothing in it depends on which
pairs or slots training saw), and each claim's truth on it is known before any hypothesis runs.

The residual stream (d_model = 128) is split into named, disjoint one-hot subspaces:

    dims  0..58   NUMBER       the number n (token embedding); also where OV_2 writes the routed values,
                               and where W_U reads the logits (W_U is the identity on these dims)
    dims 59..61   `+`, `=`, PAD
    dims 62..73   VARIABLE     the variable token v (raw identity, token embedding)
    dims 74..89   POSITION     the position t
    dims 90..101  BOUND        the bound identity: Layer 1's OV copies VARIABLE v to BOUND v

The solver, position by position:

* **Layer 1** (``blocks.0``, attention only) is positional: query t matches key t - 1 (t = 1..12), so
  a value token attends to its variable; position 0 attends to itself (its only key); the operand
  slots 13 and 14 attend to `+` (12), so they receive no bound identity; `=` (15) attends to 13 and
  14 equally. OV_1 copies VARIABLE v into BOUND v and nothing else. After Layer 1 a value token
  carries BOUND of its variable, and `=` carries 0.5 * BOUND of each variable operand.
* **Layer 2 attention** (``blocks.1``): the `=` query carries its BOUND part and a constant (from the
  `=` token); a key carries its BOUND part, a bonus on the operand slots 13/14, and a penalty for a
  VARIABLE token or `=` (so a variable in an operand slot, a variable token that carries its own
  identity at position 0, and `=` with its operands' identities are never attended). The scales make every target score equal (``TARGET_SCORE``):
  the value tokens of the variable operands and the slots of the constant operands get half the
  attention each, everything else ~exp(-TARGET_SCORE). OV_2 copies NUMBER to NUMBER, so the `=`
  residual after Layer 2's attention holds 0.5 (e_x + e_y) on NUMBER.
* **Layer 2 MLP**: a lookup table, one ReLU neuron per unordered pair {a, b} (1770 neurons), which
  writes the answer (a + b) mod 59 onto NUMBER, where W_U reads it. Not Fourier-structured at all.

Variants (each breaks one claim; see their docstrings for what else breaks with it):
``planted_no_previous_token`` (SPEC §4.1 false), ``planted_permuted_identity_qk`` (§4.2 false). And one
of another shape, true by construction: ``planted_split_fetch``, two heads per layer, the fetching role
split between Layer 2's heads (one per operand; the right operand's identity on dims 102..113).
"""

from __future__ import annotations

import math

import torch

from assignadd.model import AssignAddTransformer, ModelConfig

N = 59  # modulus
N_VARS = 12
D_MODEL = D_HEAD = 128
PLUS, EQ, PAD = N, N + 1, N + 2
FIRST_VAR = N + 3  # token id (and residual dim) of variable `a`
POSITION0 = FIRST_VAR + N_VARS  # 74: residual dim of position 0
BOUND0 = POSITION0 + 16  # 90: residual dim of the bound identity of `a`
PAIRS = [(a, b) for a in range(N) for b in range(a, N)]  # unordered pairs, a <= b
D_MLP = len(PAIRS)  # 1770

# Every intended attention target scores this (after the 1/sqrt(d_head) scale); a non-target scores
# at most 0, so it gets weight < 16 exp(-30) ~ 1e-12: the attention is a clean selection.
TARGET_SCORE = 30.0
# The lookup neurons' output scale: a firing pair neuron (post-activation 0.25) gives its answer a
# logit of 0.25 * 40 = 10, far above the 0.5 the routed values leave on NUMBER.
LOOKUP_GAIN = 40.0


def planted_config() -> ModelConfig:
    """The paper's architecture (SPEC §2.1) with a wider Layer-2 MLP: one neuron per unordered pair."""
    return ModelConfig(d_mlp=D_MLP)


def _zero_model(cfg: ModelConfig) -> AssignAddTransformer:
    model = AssignAddTransformer(cfg, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model.eval()


def _embed(model: AssignAddTransformer) -> None:
    """One-hot embeddings: token i on dim i (NUMBER, `+`, `=`, PAD, VARIABLE), position t on dim 74 + t."""
    with torch.no_grad():
        model.embed.W_E.copy_(torch.eye(model.cfg.d_vocab, D_MODEL))
        for t in range(model.cfg.n_ctx):
            model.pos_embed.W_pos[t, POSITION0 + t] = 1.0


def _layer1_positional_qk(model: AssignAddTransformer, keys_of: dict[int, list[int]]) -> None:
    """Layer 1's QK reads positions only: query position q matches each key position in ``keys_of[q]``
    with score ``TARGET_SCORE``. Head dim s + 1 stands for key position s (dim 0 is unused, so that
    query t -> key t - 1 reads as head dim t)."""
    a = model.blocks[0].attn
    g = math.sqrt(TARGET_SCORE * math.sqrt(D_HEAD))  # W_Q and W_K entries; product / sqrt(d_head) = target
    with torch.no_grad():
        for s in range(model.cfg.n_ctx):
            a.W_K[0, POSITION0 + s, s + 1] = g
        for q, keys in keys_of.items():
            for s in keys:
                a.W_Q[0, POSITION0 + q, s + 1] = g


PREVIOUS_TOKEN_KEYS = {**{t: [t - 1] for t in range(1, 13)}, 13: [12], 14: [12], 15: [13, 14]}


def _layer1_ov_copies_identity(model: AssignAddTransformer) -> None:
    """OV_1: VARIABLE v -> BOUND v, nothing else (numbers, `+`, `=`, PAD and positions write nothing)."""
    a = model.blocks[0].attn
    with torch.no_grad():
        for v in range(N_VARS):
            a.W_V[0, FIRST_VAR + v, v] = 1.0
            a.W_O[0, v, BOUND0 + v] = 1.0


def _layer2_identity_qk(model: AssignAddTransformer, key_of_query: list[int] | None = None) -> None:
    """QK_2: the `=` query's BOUND i matches a key's BOUND ``key_of_query[i]`` (the identity by
    default); a constant query component from the `=` token matches a key bonus on positions 13/14
    and a penalty on VARIABLE tokens. Head dims 0..11: identity; head dim 12: the slot term.

    The `=` query holds 0.5 BOUND per variable operand, so a matching value token scores
    0.5 * g_id^2 / sqrt(d_head); an operand slot holding a constant scores g_slot^2 / sqrt(d_head).
    Both are set to ``TARGET_SCORE``. A variable token (in an operand slot, or at position 0 where
    Layer 1 gave it its own identity) and `=` itself (which holds the operands' identities) lose
    2 * TARGET_SCORE, which outweighs any bonus they could collect.
    """
    key_of_query = list(range(N_VARS)) if key_of_query is None else key_of_query
    a = model.blocks[1].attn
    g_id = math.sqrt(2 * TARGET_SCORE * math.sqrt(D_HEAD))
    g_slot = math.sqrt(TARGET_SCORE * math.sqrt(D_HEAD))
    slot_dim = N_VARS
    with torch.no_grad():
        for i, j in enumerate(key_of_query):
            a.W_Q[0, BOUND0 + i, i] = g_id
            a.W_K[0, BOUND0 + j, i] = g_id
        a.W_Q[0, EQ, slot_dim] = g_slot
        for slot in (13, 14):
            a.W_K[0, POSITION0 + slot, slot_dim] = g_slot
        for token in (EQ, *range(FIRST_VAR, FIRST_VAR + N_VARS)):
            a.W_K[0, token, slot_dim] = -2 * g_slot


def _layer2_ov_copies_numbers(model: AssignAddTransformer) -> None:
    """OV_2: NUMBER n -> NUMBER n (head dims 0..58), so `=` receives 0.5 (e_x + e_y) on NUMBER."""
    a = model.blocks[1].attn
    with torch.no_grad():
        for n in range(N):
            a.W_V[0, n, n] = 1.0
            a.W_O[0, n, n] = 1.0


def _lookup_mlp(model: AssignAddTransformer) -> None:
    """Layer-2 MLP as a lookup table on h = 0.5 (e_x + e_y) (NUMBER part of the `=` residual).

    Pair neuron {a, b}, a != b: pre = h_a + h_b - 0.75, which is 0.25 when {x, y} = {a, b}, -0.25
    when one operand matches, and also 0.25 when x = y = a (a linear threshold cannot tell 0.5 e_a +
    0.5 e_b from e_a). Diagonal neuron {a, a}: pre = 4 h_a - 3.5, which is 0.5 only when x = y = a.
    Each neuron writes ``LOOKUP_GAIN`` onto NUMBER (a + b) mod N. So x != y: one neuron, logit 10 on
    the answer; x = y = a: the diagonal neuron gives 20 to 2a, each pair neuron {a, b} 10 to a + b.
    """
    mlp = model.blocks[1].mlp
    with torch.no_grad():
        for k, (a, b) in enumerate(PAIRS):
            if a == b:
                mlp.W_in[a, k], mlp.b_in[k] = 4.0, -3.5
            else:
                mlp.W_in[a, k], mlp.W_in[b, k], mlp.b_in[k] = 1.0, 1.0, -0.75
            mlp.W_out[k, (a + b) % N] = LOOKUP_GAIN


def _unembed(model: AssignAddTransformer) -> None:
    """W_U reads the logit of class c from NUMBER dim c."""
    with torch.no_grad():
        model.unembed.W_U.copy_(torch.eye(D_MODEL, N))


def planted_solver() -> AssignAddTransformer:
    """The task solved by the paper's mechanism, exactly: previous-token binding in Layer 1, identity
    matching in Layer 2's QK, number copying in OV_2, and an addition table in the Layer-2 MLP.

    True by construction: ``previous_token_head`` (§4.1), ``identity_qk`` (§4.2), ``heldout_generalization``
    and ``restricted_slot_generalization`` (§4.5). False by construction: ``fourier_neurons`` (§4.4),
    because the MLP is a lookup table with no periodic structure and the number embedding is one-hot
    (a flat Fourier spectrum).
    """
    model = _zero_model(planted_config())
    _embed(model)
    _layer1_positional_qk(model, PREVIOUS_TOKEN_KEYS)
    _layer1_ov_copies_identity(model)
    _layer2_identity_qk(model)
    _layer2_ov_copies_numbers(model)
    _lookup_mlp(model)
    _unembed(model)
    return model


def planted_no_previous_token() -> AssignAddTransformer:
    """The solver with Layer 1's value tokens attending to themselves instead of their variable.

    Everything else is the solver's: `=` still attends to the operand slots 13/14, and OV_1, Layer 2
    and the MLP are unchanged. The value tokens now carry no bound identity, so nothing in the prefix
    can match the `=` query: ``previous_token_head`` (§4.1) is false by construction.

    With one head per layer there is no other route for the binding (a value token can only learn its
    variable in Layer 1, and Layer 2's single head must already read values), so this variant also
    breaks behaviour: 1- and 2-variable accuracy fall to near chance, and every claim that needs
    variables (``identity_qk``'s activations and swap, held-out 1/2-var, restricted slots) fails too.
    0-variable sequences never use the binding: their accuracy stays at 100%.
    """
    model = planted_solver()
    a = model.blocks[0].attn
    keys_of = {**{t: [t] for t in range(12)}, 12: [11], 13: [12], 14: [12], 15: [13, 14]}
    with torch.no_grad():
        a.W_Q.zero_()
        a.W_K.zero_()
    _layer1_positional_qk(model, keys_of)
    return model


def derangement(n: int = N_VARS) -> list[int]:
    """pi(i) = i + 1 mod n: a permutation with no fixed point."""
    return [(i + 1) % n for i in range(n)]


def planted_permuted_identity_qk(permutation: list[int] | None = None) -> AssignAddTransformer:
    """The solver with Layer 2's identity block permuted: the query carrying variable i's bound
    identity matches the key carrying variable pi(i)'s (pi a derangement, ``derangement()`` by default).

    ``identity_qk`` (§4.2) is false by construction: M = (E_var OV_1) QK_2 (E_var OV_1)^T has its row
    maxima at (i, pi(i)), never on the diagonal, and `=` attends to the value of pi(v) when pi(v) is
    assigned (a distractor), to nothing in particular otherwise. Layer 1 is the solver's, so
    §4.1's observational items (previous-token attention, `=` to the operand slots, the positional QK)
    stay true; its causal item cannot pass, as there is no variable accuracy left to destroy.
    0-variable sequences do not use the identity block (the slot term routes constants): their
    accuracy stays at 100%.
    """
    permutation = derangement() if permutation is None else permutation
    if sorted(permutation) != list(range(N_VARS)) or any(p == i for i, p in enumerate(permutation)):
        raise ValueError(f"expected a derangement of 0..{N_VARS - 1}, got {permutation}")
    model = planted_solver()
    a = model.blocks[1].attn
    with torch.no_grad():
        a.W_Q.zero_()
        a.W_K.zero_()
    _layer2_identity_qk(model, key_of_query=permutation)
    return model


# ----- a role split between two heads --------------------------------------------------------------
BOUND_RIGHT0 = BOUND0 + N_VARS  # 102: the right operand's identity, written at `=` by Layer 1's head 1
SPLIT_D_HEAD = 64


def planted_split_config() -> ModelConfig:
    """Two heads of 64 per layer (the two-head variant's shape) and the lookup MLP's width."""
    return ModelConfig(n_heads=2, d_head=SPLIT_D_HEAD, d_mlp=D_MLP)


def planted_split_fetch() -> AssignAddTransformer:
    """The task solved with the fetching role split between Layer 2's two heads by construction: head 1.0
    fetches the left operand's value, head 1.1 the right one's, each with all of its attention.

    Layer 1 head 0.0 is the solver's previous-token head, except that `=` attends to the left slot (13)
    alone, so `=` carries the left operand's identity on BOUND; head 0.1 attends from `=` to the right
    slot (14) alone and copies that identity onto BOUND_RIGHT (dims 102..113), every other position to
    itself (a number, `+`, `=` or PAD there writes nothing). Layer 2 head 1.0 matches `=`'s BOUND against
    the keys' BOUND, with a bonus on slot 13 for a constant; head 1.1 matches BOUND_RIGHT against the
    keys' BOUND, with a bonus on slot 14. Each head's OV copies NUMBER at 0.5, so `=` receives
    0.5 (e_x + e_y) as in the solver, and the lookup MLP and W_U are the solver's.

    True by construction: every part of the paper's mechanism, with the fetching done by the two heads
    together (neither alone carries both operands); the behaviour claims.
    """
    model = _zero_model(planted_split_config())
    _embed(model)
    g1 = math.sqrt(TARGET_SCORE * math.sqrt(SPLIT_D_HEAD))
    a1, a2 = model.blocks[0].attn, model.blocks[1].attn
    keys = {0: {**{t: [t - 1] for t in range(1, 13)}, 13: [12], 14: [12], 15: [13]}, 1: {15: [14]}}
    keys[1].update({t: [t] for t in range(15)})
    with torch.no_grad():
        for head, keys_of in keys.items():
            for s in range(model.cfg.n_ctx):
                a1.W_K[head, POSITION0 + s, s + 1] = g1
            for q, ks in keys_of.items():
                for s in ks:
                    a1.W_Q[head, POSITION0 + q, s + 1] = g1
        for v in range(N_VARS):  # OV_1: head 0 VARIABLE -> BOUND, head 1 VARIABLE -> BOUND_RIGHT
            for head, out in ((0, BOUND0), (1, BOUND_RIGHT0)):
                a1.W_V[head, FIRST_VAR + v, v] = 1.0
                a1.W_O[head, v, out + v] = 1.0
        g_id = math.sqrt(TARGET_SCORE * math.sqrt(SPLIT_D_HEAD))  # the query holds a whole identity
        slot_dim = N_VARS
        for head, (query, slot) in enumerate(((BOUND0, 13), (BOUND_RIGHT0, 14))):
            for i in range(N_VARS):
                a2.W_Q[head, query + i, i] = g_id
                a2.W_K[head, BOUND0 + i, i] = g_id
            a2.W_Q[head, EQ, slot_dim] = g1
            a2.W_K[head, POSITION0 + slot, slot_dim] = g1
            for token in (EQ, *range(FIRST_VAR, FIRST_VAR + N_VARS)):
                a2.W_K[head, token, slot_dim] = -2 * g1
            for n in range(N):
                a2.W_V[head, n, n] = 1.0
                a2.W_O[head, n, n] = 0.5
    _lookup_mlp(model)
    _unembed(model)
    return model
