"""One JSON Schema per command (verimim.schemas), published as docs/schemas/*.schema.json: every
key present in every outcome (null where it does not apply), checked on real output."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import PROGRAMS, ROOT
from tests.test_cli import verimim
from verimim import driver, schemas

DEMO = str(driver.DEMO_PROGRAM)
ILL = str(PROGRAMS / "ill_typed" / "unknown_name.mim")


def _validate(command: str, stdout: str) -> dict[str, object]:
    obj = json.loads(stdout)
    jsonschema.Draft202012Validator(schemas.SCHEMAS[command]).validate(obj)
    assert list(obj) == list(schemas.SCHEMAS[command]["properties"])  # same keys, same order
    return obj


def test_schemas_are_valid_json_schemas() -> None:
    for schema in schemas.SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_published_schemas_equal_the_code() -> None:
    published = {p.name.removesuffix(".schema.json"): json.loads(p.read_text(encoding="utf-8"))
                 for p in (ROOT / "docs" / "schemas").glob("*.schema.json")}
    assert published == schemas.SCHEMAS, "run `python -m verimim.schemas docs/schemas`"


@pytest.mark.parametrize(("command", "args"), [
    ("check", [DEMO]), ("check", [ILL]), ("check", ["/nonexistent.mim"]), ("check", ["--no-such"]),
    ("run", [DEMO, "--target", "interp"]), ("run", [ILL, "--target", "interp"]),
    ("dump", [DEMO]), ("dump", [ILL]),
    ("diff", [DEMO, "--no-gpu"]), ("diff", [ILL, "--no-gpu"]),
])
def test_every_outcome_has_every_key(command: str, args: list[str]) -> None:
    p = verimim(command, *args, "--json")
    obj = _validate(command, p.stdout)
    assert obj["ok"] is (p.returncode == 0)


@pytest.mark.parametrize("args", [["/nonexistent.mim"], [DEMO, "--timeout", "abc"]])
def test_a_usage_error_nulls_the_file_and_the_command_keys_however_found(args: list[str]) -> None:
    # (a file the command could not read gave its path and `"phases": []`; a bad option, nulls)
    obj = _validate("check", verimim("check", *args, "--json").stdout)
    assert obj["file"] is None and obj["phases"] is None and obj["kernels"] is None, obj
    assert [d["code"] for d in obj["diagnostics"]] == ["E-USAGE"]


def test_run_result_is_null_on_error() -> None:
    obj = _validate("run", verimim("run", ILL, "--target", "interp", "--json").stdout)
    assert obj["result"] is None and obj["diagnostics"][0]["code"] == "E-NAME"


def test_compile_json(tmp_path: Path) -> None:
    _validate("compile", verimim("compile", ILL, "-o", str(tmp_path / "x"), "--json").stdout)


def test_fuzz_json_has_file_and_diagnostics(tmp_path: Path) -> None:
    p = verimim("fuzz", "--budget", "0.5", "--seed", "1", "--no-verify", "--out", str(tmp_path), "--json")
    obj = _validate("fuzz", p.stdout)
    assert obj["file"] is None and obj["diagnostics"] == []


def test_usage_error_without_command() -> None:
    p = verimim("--no-such", "--json")
    assert p.returncode == 2
    _validate("usage", p.stdout)


def test_a_wrong_object_is_refuted() -> None:
    # The schemas must reject what they exist to catch: a missing key, an extra one, a bad status.
    v = jsonschema.Draft202012Validator(schemas.SCHEMAS["check"])
    good = json.loads(verimim("check", DEMO, "--json").stdout)
    assert v.is_valid(good)
    assert not v.is_valid({k: x for k, x in good.items() if k != "reproducer"})
    assert not v.is_valid({**good, "surprise": 1})
    bad_phase = {**good, "phases": [{**good["phases"][0], "status": "probably"}]}
    assert not v.is_valid(bad_phase)
    bad_diag = {**good, "diagnostics": [{"severity": "error", "code": "E-X", "message": "m"}]}
    assert not v.is_valid(bad_diag)


@pytest.mark.parametrize("args", [["fuzz", "report"], ["fuzz", "report", "/nonexistent-campaign"],
                                  ["fuzz", "report", "--no-such", "x"], ["fuzz", "--seed", "3", "report"],
                                  ["fuzz", "--color", "never", "report"]])
def test_a_fuzz_report_usage_error_has_the_reports_keys(args: list[str]) -> None:
    # (a missing DIRECTORY printed the keys of `fuzz`, the campaign)
    p = verimim(*args, "--json")
    assert p.returncode == 2
    obj = _validate("fuzz-report", p.stdout)
    assert [d["code"] for d in obj["diagnostics"]] == ["E-USAGE"]


def test_a_campaign_folder_named_report_is_no_report_command() -> None:
    p = verimim("fuzz", "--campaign", "report", "--budget", "x", "--json")
    assert p.returncode == 2
    _validate("fuzz", p.stdout)
