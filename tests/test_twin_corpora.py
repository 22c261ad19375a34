"""Every row of the twin corpora's EXPECTED.tsv (tests/kernel_twins: races and barrier
divergence; tests/checker_twins: the checker phases' address spaces and memory tokens): `run`
gives the result or reports the code for those arguments; `check` accepts the well-defined twin
(a kernel twin's every kernel `proved`, or `bounded` where a loop passes the unrolling bound, with that reason)
and reports the other's code, at the location where a fifth column gives one."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from verimim import driver

CORPORA = [Path(__file__).resolve().parent / name for name in ("kernel_twins", "checker_twins")]


def _rows(corpus: Path) -> list[tuple[Path, str, str, str, str]]:
    with open(corpus / "EXPECTED.tsv", encoding="utf-8") as f:
        rows = [(r + [""] * 5)[:5] for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return [(corpus / r[0], r[1], r[2], r[3], r[4]) for r in rows]


ROWS = [r for c in CORPORA for r in _rows(c)]


def _id(row: tuple[Path, str, str, str, str]) -> str:
    return f"{row[0].parent.name}/{row[0].name} {row[2]}".strip()


def _errors(report: driver.Report) -> set[str]:
    return {d.code for d in report.diagnostics if d.severity == "error"}


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda c: c.name)
def test_every_program_has_rows_of_both_commands(corpus: Path) -> None:
    rows = _rows(corpus)
    programs = set(corpus.glob("*.mim"))
    assert len(programs) >= 50 and {r[0] for r in rows if r[1] == "check"} == programs
    assert {r[0] for r in rows if r[1] == "run"} == programs


@pytest.mark.parametrize("row", [r for r in ROWS if r[1] == "run"], ids=_id)
def test_run_row(row: tuple[Path, str, str, str, str]) -> None:
    path, _, args, expected, _ = row
    report = driver.run(str(path), [], args.split())
    if expected.lstrip("-").isdigit():
        assert report.ok and report.data["result"] == int(expected), [d.render() for d in report.diagnostics]
    else:
        assert report.exit_code == 1 and expected in _errors(report), [d.render() for d in report.diagnostics]


@pytest.mark.parametrize("row", [r for r in ROWS if r[1] == "check"], ids=_id)
def test_check_row(row: tuple[Path, str, str, str, str]) -> None:
    path, _, _, expected, where = row
    report = driver.check(str(path), [])
    if expected != "ok":
        assert report.exit_code == 1 and expected in _errors(report), [d.render() for d in report.diagnostics]
        if where:
            first = next(d for d in report.diagnostics if d.severity == "error")
            assert first.loc is not None and f"{first.loc.line}:{first.loc.col}" == where, first.render()
        return
    assert report.ok and report.exit_code == 0, [d.render() for d in report.diagnostics]
    if path.parent.name != "kernel_twins":
        return  # (the checker twins' kernels may do what the kernel model does not follow: `unknown`)
    for e in report.data["kernels"]:
        for aspect in ("races", "divergence"):
            assert e[aspect] == "proved" or (e[aspect] == "bounded" and "unrolled up to" in e["detail"]), e
