"""The JSON each command prints with `--json`: one JSON Schema (draft 2020-12) per command.

These dicts are the contract of spec/CLI.md made checkable: `complete` gives every declared key
of a command's object a value — `null` where it does not apply (the result of a run that failed,
the reproducer of a check that passed) — so a script never meets a key set that changes with the
outcome. docs/schemas/*.schema.json are these schemas written out (`python -m verimim.schemas
docs/schemas`); a test keeps both equal and validates real output against them.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"

Schema = dict[str, Any]


def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


_POS = {"type": "integer", "minimum": 1}
_NPOS = _nullable(_POS)
_STR = {"type": "string"}
_NSTR = _nullable(_STR)
_NUM = {"type": "number", "minimum": 0}
_ANY_NULLABLE: Schema = {}  # any JSON value, null included

RELATED: Schema = {
    "type": "object",
    "required": ["message", "file", "line", "col"],
    "additionalProperties": False,
    "properties": {"message": _STR, "file": _NSTR, "line": _NPOS, "col": _NPOS},
}

DIAGNOSTIC: Schema = {
    "type": "object",
    "required": ["severity", "code", "message", "file", "line", "col", "related"],
    "additionalProperties": False,
    "properties": {
        "severity": {"enum": ["error", "warning", "note"]},
        "code": {"type": "string", "pattern": "^[EW]-[A-Z0-9-]+$"},
        "message": _STR,
        "file": _NSTR,
        "line": _NPOS,
        "col": _NPOS,
        "related": {"type": "array", "items": RELATED},
    },
}

PHASE: Schema = {
    "type": "object",
    "required": ["name", "status", "time_s", "detail", "counterexample"],
    "properties": {
        "name": _STR,
        "status": {"enum": ["proved", "bounded", "validated", "refuted", "unknown", "skipped", "rejected"]},
        "time_s": _NUM,
        "detail": _STR,
        "counterexample": _ANY_NULLABLE,
        "side": {"enum": ["host", "device"]},
        "z3_s": _NUM,
    },
}

_KERNEL_STATUS = {"enum": ["proved", "bounded", "validated", "refuted", "unknown", "skipped"]}
KERNEL: Schema = {
    "type": "object",
    "required": ["name", "launch", "races", "divergence", "time_s", "detail", "counterexample"],
    "properties": {
        "name": _STR,
        "launch": _nullable({"type": "object", "properties": {"line": _NPOS, "col": _NPOS}}),
        "races": _KERNEL_STATUS,
        "divergence": _KERNEL_STATUS,
        "time_s": _NUM,
        "detail": _STR,
        "counterexample": _ANY_NULLABLE,
    },
}

_COMMON: dict[str, Schema] = {
    "file": _NSTR,
    "ok": {"type": "boolean"},
    "diagnostics": {"type": "array", "items": DIAGNOSTIC},
}
_NOBJ = _nullable({"type": "object"})


def _allows_null(schema: Schema) -> bool:
    return schema == _ANY_NULLABLE or {"type": "null"} in schema.get("anyOf", [])


def _command(title: str, properties: dict[str, Schema]) -> Schema:
    # A command's own keys are null when they do not apply: a bad option stops the command
    # before it ran, an error stops it before it had a result.
    own = {k: v if _allows_null(v) else _nullable(v) for k, v in properties.items()}
    props = {**_COMMON, **own}
    return {
        "$schema": DRAFT,
        "title": title,
        "type": "object",
        "required": list(props),
        "additionalProperties": False,
        "properties": props,
    }


SCHEMAS: dict[str, Schema] = {
    "check": _command("verimim check --json", {
        "phases": {"type": "array", "items": PHASE},
        "kernels": _nullable({"type": "array", "items": KERNEL}),
        "pipeline": _NOBJ,
        "z3": _NOBJ,
        "reproducer": _NSTR,
        "summary": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
    }),
    "run": _command("verimim run --json", {
        "target": {"enum": ["interp", "gpu"]},
        "host": _nullable({"enum": ["native", "interp"]}),
        "result": _nullable({"type": "integer"}),
        "interp_result": _nullable({"type": "integer"}),
        "stdout": _NSTR,
        "steps": _nullable({"type": "integer", "minimum": 0}),
        "pipeline": _NOBJ,  # the plan the GPU ran (null on the interpreter: the source runs)
        "reproducer": _NSTR,  # exit 3 only (CLI.md): the command that reproduces it
    }),
    "diff": _command("verimim diff --json", {
        "result": _nullable({"type": "integer"}),
        "targets": {"type": "object"},
        "skipped": _NSTR,
        "reproducer": _NSTR,
        "pipeline": _NOBJ,
    }),
    "dump": _command("verimim dump --json", {"output": _NSTR, "reproducer": _NSTR}),
    "compile": _command("verimim compile --json", {
        "outputs": _nullable({"type": "object", "properties": {"host": _STR, "device": _STR},
                              "required": ["host", "device"]}),
        "kernels": _nullable({"type": "array", "items": _STR}),
        "pipeline": _NOBJ,
        "reproducer": _NSTR,
    }),
    "fuzz": _command("verimim fuzz --json", {
        "programs": {"type": "integer", "minimum": 0},
        "per_second": _NUM,
        "failures": {"type": "array", "items": {"type": "object"}},
        "coverage": {"type": "object", "additionalProperties": {"type": "integer"}},
        "defects": _ANY_NULLABLE,
        "seconds": _NUM,
        # with --campaign DIR (fuzz/campaign.py): this run of that campaign
        "campaign": _NSTR,
        "run": _nullable({"type": "integer", "minimum": 1}),
        "verdicts": _nullable({"type": "object", "additionalProperties": {"type": "integer"}}),
        "journal_programs": _nullable({"type": "integer", "minimum": 0}),
        "new_failures": _nullable({"type": "integer", "minimum": 0}),
        "cluster": _NSTR,
        # indices whose program was drawn before (same text, arguments, defect): not checked again
        "duplicates": _nullable({"type": "integer", "minimum": 0}),
        # the oracle's mix ("pipeline" or "kernels"), and check's kernel verdicts against the runs
        # (fuzz/kernel_oracle.judge): kernels verified, verdicts by status, false alarms
        "oracle": _NSTR,
        "kernels": _NOBJ,
        # with --campaign DIR: stopped by Ctrl-C before its budget ended (exit 130, `ok` false)
        "interrupted": _nullable({"type": "boolean"}),
    }),
    # `verimim fuzz report DIR --json`: DIR/report.json (fuzz/report.py)
    "fuzz-report": _command("verimim fuzz report --json", {
        "campaign": _NSTR,
        "programs": {"type": "integer", "minimum": 0},
        "duplicates": {"type": "integer", "minimum": 0},
        "runs": {"type": "array", "items": {"type": "object"}},
        "throughput": {"type": "array", "items": {"type": "object"}},
        "coverage": {"type": "object"},
        "phases": {"type": "object"},
        "verdicts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "failures": {"type": "array", "items": {"type": "object"}},
        "comparison": _NOBJ,
        "settings": _NOBJ,
        "report": _NSTR,
    }),
    "explain": _command("verimim explain --json", {"code": _NSTR, "text": _NSTR}),
}

# The object of a usage error found before a command was known (`verimim --no-such`).
SCHEMAS["usage"] = _command("verimim --json, no valid command", {})


def complete(command: str, obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with every key of the command's schema, in schema order; absent ones are null."""
    schema = SCHEMAS.get(command)
    if schema is None:
        return obj
    out = {k: obj.get(k) for k in schema["properties"]}
    out.update({k: v for k, v in obj.items() if k not in out})  # stays visible to the schema test
    return out


def write(directory: Path) -> list[Path]:
    """Write docs/schemas/<command>.schema.json (what the docs publish)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, schema in SCHEMAS.items():
        p = directory / f"{name}.schema.json"
        p.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


if __name__ == "__main__":
    for written in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(written)
