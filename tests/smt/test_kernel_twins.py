"""Every row of tests/kernel_twins/EXPECTED.tsv: `run` gives the result or reports the code for
those arguments, `check` proves the race-free twin (every kernel `proved`, or `bounded` where a
loop passes the unrolling bound, with that reason) and reports the other's code."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from verimim import driver

TWINS = Path(__file__).resolve().parent.parent / "kernel_twins"


def _rows() -> list[list[str]]:
    with open(TWINS / "EXPECTED.tsv", encoding="utf-8") as f:
        return [(r + [""] * 4)[:4] for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]


def _errors(report: driver.Report) -> set[str]:
    return {d.code for d in report.diagnostics if d.severity == "error"}


def test_every_program_has_rows_of_both_commands() -> None:
    rows = _rows()
    programs = {p.name for p in TWINS.glob("*.mim")}
    assert len(programs) >= 90 and {r[0] for r in rows if r[1] == "check"} == programs
    assert {r[0] for r in rows if r[1] == "run"} == programs


@pytest.mark.parametrize("row", [r for r in _rows() if r[1] == "run"], ids=lambda r: f"{r[0]} {r[2]}".strip())
def test_run_row(row: list[str]) -> None:
    file, _, args, expected = row
    report = driver.run(str(TWINS / file), [], args.split())
    if expected.lstrip("-").isdigit():
        assert report.ok and report.data["result"] == int(expected), [d.render() for d in report.diagnostics]
    else:
        assert report.exit_code == 1 and expected in _errors(report), [d.render() for d in report.diagnostics]


@pytest.mark.parametrize("row", [r for r in _rows() if r[1] == "check"], ids=lambda r: r[0])
def test_check_row(row: list[str]) -> None:
    file, _, _, expected = row
    report = driver.check(str(TWINS / file), [])
    if expected != "ok":
        assert report.exit_code == 1 and expected in _errors(report), [d.render() for d in report.diagnostics]
        return
    assert report.ok and report.exit_code == 0, [d.render() for d in report.diagnostics]
    for e in report.data["kernels"]:
        for aspect in ("races", "divergence"):
            assert e[aspect] == "proved" or (e[aspect] == "bounded" and "unrolled up to" in e["detail"]), e
