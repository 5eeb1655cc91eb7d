"""The whole algorithm as one hypothesis: causal scrubbing of the paper's circuit."""

from __future__ import annotations

import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.hypotheses import Context, run_all
from assignadd.hypotheses.measures.scrubbing import _donors
from assignadd.interventions.mutants import generator
from assignadd.model import AssignAddTransformer

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)


def test_donors_share_the_key_and_are_another_row_whenever_the_group_has_one():
    keys = torch.tensor([3, 1, 3, 3, 2, 1, 7])
    donors = _donors(keys, generator(0, "test"))
    assert torch.equal(keys[donors], keys)
    alone = torch.tensor([k in (2, 7) for k in keys.tolist()])
    assert (donors[~alone] != torch.arange(len(keys))[~alone]).all()
    assert (donors[alone] == torch.arange(len(keys))[alone]).all()


def test_a_model_at_chance_has_nothing_for_the_algorithm_to_explain():
    r = run_all(Context(AssignAddTransformer(seed=3), Task(), n=200), ["whole_algorithm"])[0]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    assert items["routing_scrub_recovers"].measurement.value == 0.0
    assert not items["model_solves_the_task"].passed


@needs_reference
def test_the_papers_circuit_explains_the_reference_and_wrong_correspondences_do_not():
    r = run_all(Context(load_checkpoint(assignadd.reference_checkpoint()), Task(), n=1000), ["whole_algorithm"])[0]
    assert r.verdict == "pass", r.reason
    items = {e.name: e for e in r.evidence}
    for name, wrong in (("routing_scrub_recovers", "position_only"), ("addition_scrub_recovers", "first_operand_only")):
        e = items[name]
        assert e.measurement.low >= 0.9
        assert e.controls[wrong].value < 0.2 and e.controls[wrong].acted > 0.1
        # the floor is far below the model: the scrub had something to destroy
        assert e.measurement.extra["floor_accuracy"] < 0.5 * e.measurement.extra["model_accuracy"]
