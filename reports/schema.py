"""The JSON Schemas of the reports (draft 2020-12, in ``reports/schemas/``) and a small checker for them,
so that a report can be checked without installing ``jsonschema``:

    verify.schema.json   report.json of assignadd-verify          (``assignadd.verify/1``)
    series.schema.json   series.json of assignadd-report, a series (``assignadd.series/1``)
    sweep.schema.json    sweep.json of assignadd-report, a sweep   (``assignadd.sweep/1``)
    claim.schema.json    a claim as data, assignadd-verify --explain (``assignadd.claim-doc/1``)
    population.schema.json  population.json of assignadd-verify over several models
                         (``assignadd.verify.population/1``)

The checker reads the keywords the shipped schemas use: ``type`` (one or a list), ``const``, ``enum``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``minItems``, ``maxItems``,
``minimum``, ``pattern``, ``allOf``, ``anyOf`` and ``$ref`` into ``#/$defs``. Any other keyword raises,
so a schema cannot silently grow past what is checked. Any full JSON Schema validator accepts the same
files.

    >>> errors(json.loads(Path("out/reference/report.json").read_text()))
    []
    >>> errors(json.loads(Path("out/seed42/series.json").read_text()))  # the schema its "schema" field names
    []
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
KNOWN = {
    *("$schema", "$id", "title", "description", "$defs"),  # annotations and definitions
    *("type", "const", "enum", "minimum", "pattern"),  # a value
    *("properties", "required", "additionalProperties", "items", "minItems", "maxItems"),  # objects, arrays
    *("allOf", "anyOf", "$ref"),  # schemas combined
}
BY_ID = {
    "assignadd.verify/1": "verify",
    "assignadd.series/1": "series",
    "assignadd.sweep/1": "sweep",
    "assignadd.claim-doc/1": "claim",
    "assignadd.verify.population/1": "population",
}
_TYPES = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
}


@cache
def load(name: str = "verify") -> dict:
    """A shipped schema by name: ``verify`` (report.json's), ``series`` or ``sweep``."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


def errors(doc, schema: dict | None = None) -> list[str]:
    """Every way ``doc`` breaks ``schema``, each as ``path: what``; [] if none. Default: the shipped schema
    that the document's own ``schema`` field names, report.json's when it names none of them."""
    if schema is None:
        name = doc.get("schema") if isinstance(doc, dict) else None
        schema = load(BY_ID.get(name, "verify") if isinstance(name, str) else "verify")
    out: list[str] = []
    _check(doc, schema, schema, "$", out)
    return out


def _check(x, s: dict, root: dict, where: str, out: list[str]) -> None:
    unknown = set(s) - KNOWN
    if unknown:
        raise ValueError(f"schema at {where} uses {sorted(unknown)}, which this checker does not read")
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"schema at {where}: only '#/$defs/...' references are read, got {ref!r}")
        _check(x, root["$defs"][ref.removeprefix("#/$defs/")], root, where, out)
    for sub in s.get("allOf", []):
        _check(x, sub, root, where, out)
    if "anyOf" in s:
        first_errors = []
        for sub in s["anyOf"]:
            found: list[str] = []
            _check(x, sub, root, where, found)
            if not found:
                break
            first_errors.append(found[0])
        else:
            out.append(f"{where}: matches none of the {len(s['anyOf'])} alternatives ({'; '.join(first_errors)})")
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_TYPES[t](x) for t in types):
            out.append(f"{where}: expected {' or '.join(types)}, found {_kind(x)}")
            return
    if "const" in s and x != s["const"]:
        out.append(f"{where}: expected {s['const']!r}, found {x!r}")
    if "enum" in s and x not in s["enum"]:
        out.append(f"{where}: expected one of {s['enum']}, found {x!r}")
    if isinstance(x, (int, float)) and not isinstance(x, bool) and "minimum" in s and x < s["minimum"]:
        out.append(f"{where}: {x} is below the minimum {s['minimum']}")
    if isinstance(x, str) and "pattern" in s and not re.search(s["pattern"], x):
        out.append(f"{where}: {x!r} does not match {s['pattern']!r}")
    if isinstance(x, dict):
        for key in s.get("required", []):
            if key not in x:
                out.append(f"{where}: missing {key!r}")
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for key, value in x.items():
            if key in props:
                _check(value, props[key], root, f"{where}.{key}", out)
            elif extra is False:
                out.append(f"{where}: unexpected {key!r}")
            elif isinstance(extra, dict):
                _check(value, extra, root, f"{where}.{key}", out)
    if isinstance(x, list):
        if "minItems" in s and len(x) < s["minItems"]:
            out.append(f"{where}: {len(x)} items, expected at least {s['minItems']}")
        if "maxItems" in s and len(x) > s["maxItems"]:
            out.append(f"{where}: {len(x)} items, expected at most {s['maxItems']}")
        if "items" in s:
            for i, value in enumerate(x):
                _check(value, s["items"], root, f"{where}[{i}]", out)


def _kind(x) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](x):
            return name
    return type(x).__name__
