"""Diagnostics as a SARIF 2.1.0 log (OASIS), the format editors and CI code scanning read.

One run per command; its rules are the codes that occur, described from docs/diagnostics.md
(verimim.explain), so the explanation an editor shows is `verimim explain CODE`. Columns count
Unicode code points, as verimim's do (`columnKind`), not SARIF's default UTF-16 units.
"""
from __future__ import annotations

import os
import shlex
import urllib.parse
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from verimim import explain
from verimim.diagnostics import Diagnostic, Loc, elide

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "note": "note"}


def _tool_version() -> str:
    try:
        return version("verimim")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def _uri(file: str) -> str:
    p = Path(file)
    if p.is_absolute():
        return p.as_uri()
    # a relative reference, percent-encoded as a URI needs (`a b#1.mim` is `a%20b%231.mim`; a byte
    # of the name that is no UTF-8 is its own escape)
    return urllib.parse.quote(os.fsencode(p.as_posix()), safe="/")


def _location(loc: Loc, message: str | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(loc.file)}}
    if loc.line:
        physical["region"] = {"startLine": loc.line, **({"startColumn": loc.col} if loc.col else {})}
    out: dict[str, Any] = {"physicalLocation": physical}
    if message is not None:
        out["message"] = {"text": elide(message)}
    return out


def _rule(code: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"id": code}
    page = explain.lookup(code)
    if page is not None:
        rule["shortDescription"] = {"text": page.summary}
        rule["fullDescription"] = {"text": page.description}
        rule["help"] = {"text": f"verimim explain {code}", "markdown": page.body}
        rule["defaultConfiguration"] = {"level": _LEVEL.get(page.severity, "error")}
    return rule


def _result(diag: Diagnostic, rule_index: int, fallback_file: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": diag.code,
        "ruleIndex": rule_index,
        "level": _LEVEL.get(diag.severity, "error"),
        "message": {"text": elide(diag.message)},
    }
    loc = diag.loc if diag.loc is not None else (Loc(fallback_file) if fallback_file else None)
    if loc is not None:
        result["locations"] = [_location(loc)]
    related = [_location(r.loc, r.message) | {"id": i} for i, r in enumerate(diag.related) if r.loc is not None]
    if related:
        result["relatedLocations"] = related
    # Related facts without a place stay in the message: SARIF has nowhere else to put them.
    loose = [r.message for r in diag.related if r.loc is None]
    if loose:
        result["message"]["text"] += "".join(f"\nnote: {elide(m)}" for m in loose)
    return result


def log(diags: list[Diagnostic], file: str | None, exit_code: int, command: str,
        argv: list[str] | None = None) -> dict[str, Any]:
    """The SARIF log of one command's diagnostics (`argv`: the command line's arguments after
    `verimim`, its `commandLine`; else the command and file alone)."""
    codes = list(dict.fromkeys(d.code for d in diags))
    index = {c: i for i, c in enumerate(codes)}
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "verimim", "version": _tool_version(),
                            "rules": [_rule(c) for c in codes]}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": exit_code in (0, 1), "exitCode": exit_code,
                         "commandLine": shlex.join(["verimim", *argv]) if argv is not None
                         else f"verimim {command} {file or ''}".strip()}],
        "results": [_result(d, index[d.code], file) for d in diags],
    }
    if file is not None:
        run["artifacts"] = [{"location": {"uri": _uri(file)}}]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
