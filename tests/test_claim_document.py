"""A claim as data: `assignadd-verify --explain CLAIM` prints a versioned document, and the document
re-runs the claim (same verdict when unchanged; the document's bars when edited; refused when it
changes what the code measures)."""

from __future__ import annotations

import copy
import json

import pytest

import assignadd
from assignadd.hypotheses import REGISTRY
from assignadd.reports.claim_document import DOCUMENT_SCHEMA, DocumentError, claim_document, documented
from assignadd.reports.schema import errors
from assignadd.reports.verify_cli import main

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("cid", list(REGISTRY))
def test_every_claim_serializes_to_a_document_its_schema_accepts(cid):
    doc = claim_document(cid)
    assert doc["schema"] == DOCUMENT_SCHEMA and doc["claim"] == cid
    assert errors(doc) == []
    names = [it["name"] for it in doc["items"]]
    assert len(names) == len(set(names)) >= 1
    assert any(it["required"] and it["kind"] == "causal" for it in doc["items"])  # the rule needs one
    for it in doc["items"]:
        assert it["threshold"]["reason"].strip() and it["statistic"].strip()
        assert it["site"], f"{it['name']}: every shipped item says where it measures"
        if it["kind"] == "causal":
            assert it["intervention"], f"{it['name']}: a causal item says what it changes"
        assert set(it["controls"]) <= set(doc["controls"]), f"{it['name']}: a control the claim does not describe"
    assert documented(doc).id == cid


def test_explain_prints_the_document_and_reads_no_checkpoint(capsys):
    code, out, _ = run(capsys, "--explain", "identity_qk")
    assert code == 0
    assert json.loads(out) == claim_document("identity_qk") and json.loads(out)["pool_size"] == 2000
    code, out, _ = run(capsys, "--explain", "whole_algorithm", "--n", 500)
    assert code == 0 and json.loads(out) == claim_document("whole_algorithm", n=500)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--explain", "no_such_claim"], "unknown claim id"),
        (["--explain", "identity_qk", "some.pt"], "give it alone"),
    ],
)
def test_explain_misuse_is_one_line_and_exit_2(capsys, argv, says):
    code, _, err = run(capsys, *argv)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_a_document_that_changes_what_is_measured_is_refused():
    doc = claim_document("identity_qk")
    for edit in (
        lambda d: d["items"][0].__setitem__("statistic", "something else"),
        lambda d: d["items"][0].__setitem__("kind", "causal"),
        lambda d: d["items"].pop(),
        lambda d: d.__setitem__("claim", "no_such_claim"),
        lambda d: d["items"][0]["threshold"].__setitem__("direction", "=="),  # the schema's enum
    ):
        bad = copy.deepcopy(doc)
        edit(bad)
        with pytest.raises(DocumentError):
            documented(bad)


@pytest.mark.parametrize(
    "content, says",
    [("{not json", "not a JSON document"), ('{"schema": "assignadd.claim-doc/1"}', "not a claim document")],
)
def test_a_bad_claim_doc_file_is_one_line_and_exit_2(capsys, tmp_path, content, says):
    f = tmp_path / "doc.json"
    f.write_text(content)
    code, _, err = run(capsys, "--claim-doc", f, "--quiet")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


@needs_reference
def test_the_document_reruns_the_claim_to_the_same_verdict_and_an_edited_bar_decides(capsys, tmp_path):
    doc = claim_document("identity_qk", n=300)
    (tmp_path / "doc.json").write_text(json.dumps(doc))
    args = ["--quiet", "--jobs", "1"]  # the document's pool_size (300) is the run's --n
    assert run(capsys, "--only", "identity_qk", "--n", 300, "--json", tmp_path / "plain.json", *args)[0] == 0
    assert run(capsys, "--claim-doc", tmp_path / "doc.json", "--json", tmp_path / "doc_run.json", *args)[0] == 0
    plain, again = (json.loads((tmp_path / f).read_text()) for f in ("plain.json", "doc_run.json"))
    assert plain["claims"] == again["claims"]  # every value, verdict and bar the same
    assert again["claim_documents"] == {"identity_qk": doc} and errors(again) == []

    strict = copy.deepcopy(doc)
    swap = next(it for it in strict["items"] if it["name"] == "attention_follows_identity_swap")
    swap["threshold"].update(value=1.01, reason="a bar no rate can clear")
    (tmp_path / "strict.json").write_text(json.dumps(strict))
    code, out, _ = run(capsys, "--claim-doc", tmp_path / "strict.json", "--json", tmp_path / "strict_run.json", *args)
    assert code == 1 and "FAIL" in out
    result = json.loads((tmp_path / "strict_run.json").read_text())["claims"][0]
    assert result["verdict"] == "fail" and "attention_follows_identity_swap" in result["reason"]
    assert REGISTRY["identity_qk"].__name__ == "IdentityQK"  # the document's claim did not outlive the command

    code, _, err = run(capsys, "--claim-doc", tmp_path / "doc.json", "--n", 500, *args)
    assert code == 2 and "pools of 300" in err  # its statistics are stated for the pool size it was made with
