"""The interface recodings of the reference (mutants that recode what one component writes, or what the
next reads) and what ``hypotheses.interfaces.check_all`` must say about each; checked in
tests/test_interfaces.py, and for the breaks whose own claim does not fail them in the reference's break
matrix (tests/test_mutants.py), which fits the same interfaces on the same pools."""

from __future__ import annotations

from assignadd.hypotheses.interfaces import BAR, broken_naming

# (mutant, the interface it recodes): the writer's output recoded, or the reader's input recoded the other way
RECODINGS = [
    ("layer1_output_noised", "ov1_to_layer2"),
    ("layer2_keys_rotated", "ov1_to_layer2"),
    ("layer2_queries_rotated", "ov1_to_layer2"),
    ("layer2_output_recoded", "ov2_to_mlp"),
    ("layer2_value_bias_shifted", "ov2_to_mlp"),
    ("mlp_input_rotated", "ov2_to_mlp"),
    ("mlp_output_rotated", "mlp_to_unembedding"),
    ("unembedding_input_rotated", "mlp_to_unembedding"),
]
# The break matrix fits the interfaces where a break's own claim does not fail it; these four recodings
# are such breaks, so their checks are asserted there (the fits are the same: an interface's pools do not
# depend on the claims' n), and tests/test_interfaces.py does not fit them again.
CHECKED_IN_THE_BREAK_MATRIX = {
    "layer1_output_noised",
    "layer2_output_recoded",
    "layer2_value_bias_shifted",
    "mlp_output_rotated",
}
WRITER = {
    "ov1_to_layer2": "previous_token_head",
    "ov2_to_mlp": "shared_residual",
    "mlp_to_unembedding": "fourier_neurons",
}


def assert_recoding_localized(checks: list[dict], where: str) -> None:
    """The interface recoded is broken; those after it are not a recoding; those before it are upstream of
    the break (a recoding there may make up for one later, but not significantly better: the later one
    localizes). The writer's claim is named by the broken interface, the claims upstream of it are not."""
    got = {c["interface"]: c for c in checks}
    order = list(got)
    for interface, c in got.items():
        assert c["plain"]["ci"][1] < BAR.value  # the answers fail
        if interface == where:
            assert c["verdict"] == "interface-broken", c
            assert c["recoded"]["ci"][0] >= BAR.value
            assert c["recoded"]["n"] == c["plain"]["n"]  # scored on plain's sequences, fitted on others
        elif order.index(interface) < order.index(where):
            assert c["verdict"] == "upstream of the break", c
            assert c["recoded"] is not None and where in c["reason"]  # fitted, and the break is named
        else:
            assert c["verdict"] == "not a recoding", c
    assert broken_naming(checks, WRITER[where]) == where
    for upstream in ("previous_token_head", "identity_qk")[: 0 if where == "ov1_to_layer2" else 2]:
        assert broken_naming(checks, upstream) is None
