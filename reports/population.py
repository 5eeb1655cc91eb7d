"""One verdict over many models: the claims of several checkpoints side by side.

A claim about one checkpoint says what that model computes; whether the paper's mechanism is what
*training* finds is a statement about a population of runs (seeds, or the checkpoints of a sweep). From
the ``assignadd-verify`` reports of several models (``reports.verify.verify``, one each, the same seed,
pool size and claims), per claim:

    holds      the models where it passes
    share      holds / models, with its exact Clopper-Pearson 95% interval: how often a model trained
               so has the mechanism, read as a rate over independent runs (the interval is only as good
               as that independence: checkpoints of one run are not independent draws)
    not held   each other model with its verdict and the items that decided it (required items that
               did not pass, with value, interval and bar; the claim's reason where no item did)

The document (``assignadd.verify.population/1``, reports/schemas/population.schema.json) holds each
model's own summary too; ``assignadd-verify CKPT CKPT ... --out DIR`` writes it beside each model's
full report, and ``assignadd-report RUN RUN ...`` the same over the runs' series claims
(``series_summary``). The same checkpoints, seed and options give a byte-identical document.
"""

from __future__ import annotations

from pathlib import Path

from . import html as H
from .render import ROLE_NAMES, _md_table, _site, dumps, fmt_interval, fmt_threshold

SCHEMA = "assignadd.verify.population/1"


def model_labels(paths: list[str]) -> list[str]:
    """Short distinct names for the models: each path less the folders all of them share (a run's
    ``final.pt`` named by its run folder)."""
    parts = [Path(p).parts for p in paths]
    common = 0
    while all(len(q) > common + 1 for q in parts) and len({q[common] for q in parts}) == 1:
        common += 1
    labels = ["/".join(q[common:]) for q in parts]
    labels = [s[: -len("/final.pt")] if s.endswith("/final.pt") else s for s in labels]
    return labels if len(set(labels)) == len(labels) else list(paths)


def _not_passing(claim: dict) -> list[dict]:
    """The required items of one claim's result that did not pass: name, status, value, interval, bar."""
    return [
        {
            "item": e["name"],
            "status": e["status"],
            "value": e["measurement"]["value"],
            "ci": e["measurement"]["ci"],
            "threshold": fmt_threshold(e["threshold"]),
        }
        for e in claim["evidence"]
        if e["required"] and e["status"] != "pass"
    ]


def summarize(reports: list[dict], labels: list[str] | None = None) -> dict:
    """The population document for ``reports`` (report.json documents, one per model, in the order given).
    Raises ValueError when they were not run alike (seed, pool size, claims) or there are none."""
    if not reports:
        raise ValueError("no models to summarize")
    labels = labels or model_labels([r["checkpoint"]["path"] for r in reports])
    first = reports[0]
    for r, label in zip(reports[1:], labels[1:]):
        for key in ("seed", "n", "only"):
            if r[key] != first[key]:
                raise ValueError(f"{label}: run with {key} = {r[key]}, the first model with {first[key]}")
    return across(reports, labels, first["tool"], {"seed": first["seed"], "n": first["n"], "only": first["only"]})


def series_summary(docs: list[dict], labels: list[str]) -> dict:
    """The population document over training runs: each run's ``series.json`` (``assignadd-report``), its
    series claims (``learning_phases``) as the claims, its last checkpoint as the model. Raises ValueError
    when the runs were not measured alike (pool size)."""
    from .. import __version__

    for d, label in zip(docs[1:], labels[1:]):
        if d["settings"]["n"] != docs[0]["settings"]["n"]:
            raise ValueError(
                f"{label}: measured with --n {d['settings']['n']}, the first run with {docs[0]['settings']['n']}"
            )
    reports = []
    for d in docs:  # each run as a report: its last checkpoint, its series claims
        last, claims = d["checkpoints"][-1], list(d["series_claims"].values())
        reports.append(
            {
                "checkpoint": {"path": d["source"], "sha256": last["sha256"], "step": last["step"]},
                "claims": claims,
                "summary": {"passed": sum(c["verdict"] == "pass" for c in claims), "total": len(claims)},
            }
        )
    tool = {"name": "assignadd-report", "version": __version__}
    return across(
        reports, labels, tool, {"seed": docs[0]["settings"]["pool_seed"], "n": docs[0]["settings"]["n"], "only": None}
    )


def across(reports: list[dict], labels: list[str], tool: dict, settings: dict) -> dict:
    """The population document: per claim of ``reports`` (each ``{"checkpoint", "claims", "summary"}``, the
    claims as ``ClaimResult.to_dict()``, the same claims in each) how many hold, with the interval, and
    what decided the others."""
    from ..interventions.statistics import rate_ci

    first = reports[0]
    ids = [c["claim"] for c in first["claims"]]
    for r, label in zip(reports, labels):
        if [c["claim"] for c in r["claims"]] != ids:
            raise ValueError(f"{label}: other claims than the first model's")
    claims = []
    for i, cid in enumerate(ids):
        results = [r["claims"][i] for r in reports]
        held = [c["verdict"] == "pass" for c in results]
        share, low, high = rate_ci(held)
        counts = {v: sum(c["verdict"] == v for c in results) for v in ("pass", "fail", "inconclusive", "error")}
        claims.append(
            {
                "claim": cid,
                "spec": results[0]["spec"],
                "holds": sum(held),
                "models": len(results),
                "share": share,
                "ci": [low, high],
                "verdicts": counts,
                "not_held": [
                    {"model": label, "verdict": c["verdict"], "items": _not_passing(c), "reason": c["reason"]}
                    for label, c in zip(labels, results)
                    if c["verdict"] != "pass"
                ],
            }
        )
    models = [
        {
            "label": label,
            "checkpoint": r["checkpoint"],
            "verdicts": {c["claim"]: c["verdict"] for c in r["claims"]},
            "passed": r["summary"]["passed"],
            "total": r["summary"]["total"],
            # where a report names its components (a layout other than the paper's, or --components)
            **({"components": {role: _site(f) for role, f in r["components"].items()}} if r.get("components") else {}),
        }
        for label, r in zip(labels, reports)
    ]
    return {
        "schema": SCHEMA,
        "tool": tool,
        **settings,
        "models": models,
        "claims": claims,
        "summary": {
            "models": len(reports),
            "claims_held_everywhere": [c["claim"] for c in claims if c["holds"] == c["models"]],
            "all_passed": all(c["holds"] == c["models"] for c in claims),
        },
    }


def _with_interval(value, ci) -> str:
    """``value [low, high]``, the interval rounded outwards (``render.fmt_interval``)."""
    v, lo, hi = fmt_interval(value, *ci) if value is not None else ("n/a", "n/a", "n/a")
    return f"{v} [{lo}, {hi}]"


def _why(entry: dict) -> str:
    """What decided one model's verdict on a claim: its items that did not pass, else the reason."""
    items = [
        f"{x['item']} {_with_interval(x['value'], x['ci'])} ({x['status']}, bar {x['threshold']})"
        for x in entry["items"]
    ]
    return "; ".join(items) or entry["reason"]


def _not_held(doc: dict) -> list[tuple[str, str]]:
    """Each (claim, model) that did not hold: the claim, and `` on MODEL (VERDICT): why``."""
    return [(c["claim"], f" on {x['model']} ({x['verdict']}): {_why(x)}") for c in doc["claims"] for x in c["not_held"]]


HEADER = ["claim", "holds in", "share [95% CI]", "not held (model: verdict)"]


def _rows(doc: dict) -> list[list[str]]:
    return [
        [
            c["claim"],
            f"{c['holds']} of {c['models']}",
            _with_interval(c["share"], c["ci"]),
            ", ".join(f"{x['model']}: {x['verdict']}" for x in c["not_held"]) or "-",
        ]
        for c in doc["claims"]
    ]


def _model_rows(doc: dict, verdict=str) -> tuple[list[str], list[list]]:
    """The models table: its header, and per model its label, how many claims passed and each verdict;
    then, where some model names its components, where they were found."""
    ids = [c["claim"] for c in doc["claims"]]
    rows = [
        [m["label"], f"{m['passed']} of {m['total']}", *(verdict(m["verdicts"][c]) for c in ids)] for m in doc["models"]
    ]
    if not any(m.get("components") for m in doc["models"]):
        return ["model", "passed", *ids], rows
    for row, m in zip(rows, doc["models"]):
        row.append(_components(m) or "the paper's")
    return ["model", "passed", *ids, "components"], rows


def _components(model: dict) -> str:
    """A model's components on one line ("previous-token head 0.0, fetching head 1.0+1.1, adding MLP 1"), or
    "" where its report does not name them (the paper's layout)."""
    return ", ".join(f"{ROLE_NAMES.get(role, role)} {site}" for role, site in model.get("components", {}).items())


def terminal_table(doc: dict) -> str:
    """The claims across the models as plain text: the table, then what decided each model that did not hold."""
    rows = _rows(doc)
    widths = [max(len(s) for s in col) for col in zip(HEADER, *rows)]
    lines = [f"{doc['summary']['models']} models, seed {doc['seed']}, pools of {doc['n']}", ""]
    lines += ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(s.ljust(w) for s, w in zip(r, widths)).rstrip() for r in rows]
    details = [f"  {claim}{why}" for claim, why in _not_held(doc)]
    if details:
        lines += ["", "Not held:", *details]
    found = [f"  {m['label']}: {_components(m)}" for m in doc["models"] if m.get("components")]
    if found:
        lines += ["", "Components found:", *found]
    everywhere = len(doc["summary"]["claims_held_everywhere"])
    lines += ["", f"{everywhere} of {len(doc['claims'])} claims hold in every model"]
    return "\n".join(lines) + "\n"


SHARE_NOTE = "A share's interval is exact (Clopper-Pearson, 95%)."


def markdown(doc: dict) -> str:
    lines = [f"# The claims over {doc['summary']['models']} models", ""]
    lines += [f"Seed {doc['seed']}, pools of {doc['n']}; {SCHEMA}. {SHARE_NOTE}", ""]
    lines += _md_table(HEADER, _rows(doc))
    lines += ["", "## Models", ""] + _md_table(*_model_rows(doc))
    details = [f"- `{claim}`{why}" for claim, why in _not_held(doc)]
    if details:
        lines += ["", "## Not held", "", *details]
    return "\n".join(lines) + "\n"


def html_page(doc: dict) -> str:
    models = doc["summary"]["models"]
    details = [H.tag("li", H.tag("code", claim), why) for claim, why in _not_held(doc)]
    return H.page(
        f"assignadd: the claims over {models} models",
        H.tag("h1", f"The claims over {models} models"),
        H.tag("p", f"Seed {doc['seed']}, pools of {doc['n']}. {SHARE_NOTE}", class_="meta"),
        H.table(HEADER, _rows(doc)),
        H.tag("h2", "Models"),
        H.table(*_model_rows(doc, H.verdict), wide=True),
        *((H.tag("h2", "Not held"), H.tag("ul", details)) if details else ()),
    )


def population_files(doc: dict) -> dict[str, str]:
    """{file name: text} for ``--out``: population.json, population.md, population.html."""
    return {"population.json": dumps(doc), "population.md": markdown(doc), "population.html": html_page(doc)}


# ----- the command: assignadd-verify CKPT CKPT ... or a folder of runs --------------------------------
def run_folders(path) -> list[Path]:
    """The final checkpoints of the training runs directly inside the folder ``path``, sorted by name; []
    when it holds none (or is a run folder itself: then it is one checkpoint, not several)."""
    from ..cli_util import FINAL_NAMES

    path = Path(path)
    if not path.is_dir() or any((path / name).is_file() for name in FINAL_NAMES):
        return []
    finals = (next((d / n for n in FINAL_NAMES if (d / n).is_file()), None) for d in sorted(path.iterdir()))
    return [f for f in finals if f is not None]


def checkpoints_given(paths: list[str]) -> list[str]:
    """The checkpoints the command line names: as given, or for one folder of training runs (``run_folders``)
    their final checkpoints, when it holds more than one."""
    runs = run_folders(paths[0]) if len(paths) == 1 else []
    return [str(p) for p in runs] if len(runs) > 1 else list(paths)


def verify_many(args, paths: list[Path], only: list[str] | None, components) -> int:
    """``assignadd-verify`` over several checkpoints: each verified in turn (``reports.verify.verify``, the
    same flags), then the claims across them on stdout, and with ``--json``/``--out`` as files. Exit 0 when
    every claim holds in every model, 1 otherwise, 2 on bad input (one line naming the file)."""
    import sys

    from ..cli_util import Progress, exit_bad_input, write_folder_or_exit
    from ..fileio import atomic_write
    from . import render
    from .verify import DEFAULT_N, claim_ids, verify

    labels = model_labels([str(p) for p in paths])
    task = {"f": args.f, "r": args.r, "seed": args.split_seed}
    reports, files = [], {}
    for k, (path, label) in enumerate(zip(paths, labels), 1):
        if not args.quiet:
            print(f"model {k}/{len(paths)}: {path}", file=sys.stderr, flush=True)
        progress = Progress(len(claim_ids(only)), "claim", args.quiet)
        try:
            v = verify(
                path, only=only, seed=args.seed, n=args.n or DEFAULT_N, device=args.device, task=task,
                jobs=args.jobs, components=components, figures=bool(args.out),
                on_result=lambda i, cid, r, s: progress.done(i, cid, r["verdict"], s),
            )  # fmt: skip
        except ValueError as e:
            exit_bad_input(str(e))
        finally:
            progress.close()
        reports.append(v.report)
        if args.out:
            report_files = render.report_files(v.report, v.figures(), v.timings)
            files.update({f"{label.replace('/', '-')}/{name}": text for name, text in report_files.items()})
    doc = summarize(reports, labels)
    sys.stdout.write(terminal_table(doc))
    if args.json:
        atomic_write(args.json, dumps(doc))
    if args.out:
        write_folder_or_exit(args.out, {**population_files(doc), **files})
        if not args.quiet:
            print(
                f"written to {Path(args.out).resolve() / 'population.html'} (and each model's report)", file=sys.stderr
            )
    return 0 if doc["summary"]["all_passed"] else 1
