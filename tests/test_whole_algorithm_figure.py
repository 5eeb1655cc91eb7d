"""The whole-algorithm breakdown figure is drawn from the claim's JSON alone, and shows each group and
each doubled pair it is given."""

from __future__ import annotations

from assignadd.reports.figures import claim_figures, whole_algorithm_figure


def claim(groups: dict, per_pair: dict | None = None) -> dict:
    sizes = {g: 10 for g in groups}
    routing = {
        "name": "routing_scrub_recovers",
        "measurement": {
            "value": 0.9,
            "extra": {
                "group_sizes": sizes,
                "model_accuracy_by_group": {g: v[0] for g, v in groups.items()},
                "scrubbed_accuracy_by_group": {g: v[1] for g, v in groups.items()},
            },
        },
    }
    addition = {
        "name": "addition_scrub_recovers",
        "measurement": {
            "value": 1.0,
            "extra": {"group_sizes": sizes, "scrubbed_accuracy_by_group": {g: v[2] for g, v in groups.items()}},
        },
    }
    evidence = [routing, addition]
    if per_pair is not None:
        evidence.append(
            {
                "name": "doubled_pair_errors_are_the_adders",
                "measurement": {
                    "value": 0.9,
                    "extra": {"by_doubled_pair [model, ideal input, weights-only adder]": per_pair},
                },
            }
        )
    return {"claim": "whole_algorithm", "evidence": evidence}


def test_breakdown_is_a_png_in_the_claims_section():
    c = claim(
        {"1var_restricted_slot": (0.7, 0.2, 0.7), "doubled pair (n, n)": (0.4, 0.4, 0.4)},
        {"3": [0.0, 0.0, 1.0], "29": [1.0, 1.0, 1.0]},
    )
    fig = whole_algorithm_figure(c)
    assert fig.key == "breakdown_whole_algorithm" and fig.claim == "whole_algorithm"
    assert fig.png[:8] == b"\x89PNG\r\n\x1a\n" and len(fig.png) > 10_000


def test_no_breakdown_without_the_scrub_items_and_other_claims_get_only_their_forest():
    assert whole_algorithm_figure({"claim": "whole_algorithm", "evidence": []}) is None
    c = claim({"0var_heldout_pair": (1.0, 1.0, 1.0)})  # no doubled-pair item: one panel
    assert whole_algorithm_figure(c) is not None
    other = {
        "claim": "identity_qk",
        "evidence": [
            {
                "name": "x",
                "kind": "causal",
                "required": True,
                "passed": True,
                "measurement": {"value": 0.9, "ci": [0.8, 1.0]},
                "threshold": {"value": 0.5, "direction": ">=", "bound": "lower"},
                "controls": {},
            }
        ],
    }
    assert [f.key for f in claim_figures(other)] == ["forest_identity_qk"]
