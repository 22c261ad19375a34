"""Every program of the corpus and of ../shared/examples through the frontend, and back through
`verimim dump`: well-formed ones type-check, ill-typed ones fail with their code at their
location, and printing then re-parsing is the identity."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS, annotations, need_shared, shared_examples
from verimim import driver

WELL_TYPED = sorted((PROGRAMS / "valid").glob("*.mim")) + sorted((PROGRAMS / "runtime_errors").glob("*.mim")) \
    + sorted((PROGRAMS / "phase_errors").glob("*.mim"))
ILL_TYPED = sorted((PROGRAMS / "ill_typed").glob("*.mim"))
# Accepted by the front end as upstream's is (an implicit argument solved without comparing
# universe levels), ill-typed once a phase rebuilds them: their dump writes that argument out
# (`core.bitcast @* I32 t`), which the front end refuses, as upstream's does an explicit one.
REBUILT_ILL_TYPED = [p for p in WELL_TYPED if annotations(p).get("EXPECT-ERROR") == "E-TYPE"]
PRINTABLE = [p for p in WELL_TYPED if p not in REBUILT_ILL_TYPED]


def ids(paths: list[Path]) -> list[str]:
    return [f"{p.parent.name}/{p.name}" for p in paths]


def test_corpus_is_present() -> None:
    assert len(WELL_TYPED) >= 40 and len(ILL_TYPED) >= 15


@pytest.mark.parametrize("name", [p.name for p in shared_examples()] or ["none"])
def test_shared_example_type_checks(name: str) -> None:
    """Every shared example is well-typed (some are then rejected by a phase or fail at run time)."""
    need_shared()
    from tests.conftest import EXAMPLES
    from verimim.driver import load, run_with_big_stack

    world, unit = run_with_big_stack(lambda: load(str(EXAMPLES / name), []))
    assert "main" in world.externals


def _dump_fixpoint(path: Path, tmp_path: Path) -> None:
    first = driver.dump(str(path), [])
    assert first.ok and first.text, [d.render() for d in first.diagnostics]
    again = tmp_path / ("re_" + path.name)
    again.write_text(first.text, encoding="utf-8")
    second = driver.dump(str(again), [])
    assert second.ok, [d.render() for d in second.diagnostics] + [first.text]
    assert second.text == first.text


@pytest.mark.parametrize("path", PRINTABLE, ids=ids(PRINTABLE))
def test_dump_round_trips(path: Path, tmp_path: Path) -> None:
    _dump_fixpoint(path, tmp_path)


@pytest.mark.parametrize("path", REBUILT_ILL_TYPED, ids=ids(REBUILT_ILL_TYPED))
def test_the_dump_of_an_application_ill_typed_once_rebuilt_is_refused(path: Path, tmp_path: Path) -> None:
    first = driver.dump(str(path), [])
    assert first.ok and first.text, [d.render() for d in first.diagnostics]
    again = tmp_path / ("re_" + path.name)
    again.write_text(first.text, encoding="utf-8")
    assert [d.code for d in driver.dump(str(again), []).diagnostics if d.severity == "error"] == ["E-TYPE"]


@pytest.mark.parametrize("name", [p.name for p in shared_examples()] or ["none"])
def test_dump_round_trips_shared_examples(name: str, tmp_path: Path) -> None:
    need_shared()
    from tests.conftest import EXAMPLES

    _dump_fixpoint(EXAMPLES / name, tmp_path)


def test_dot_output_is_a_graph() -> None:
    report = driver.dump(str(driver.DEMO_PROGRAM), [], dot=True)
    assert report.ok and report.text is not None
    assert report.text.startswith("digraph verimim {")
    assert "con square" in report.text and "->" in report.text


def test_dot_output_after_a_phase_is_a_graph_of_both_worlds() -> None:
    # (`--dot --after PHASE` printed Mim)
    report = driver.dump(str(driver.DEMO_PROGRAM), [], dot=True, after="gpu.split_apply")
    assert report.ok and report.text is not None and report.text.startswith("digraph verimim {"), report.text[:80]
    # the kernel twice (the device World's and the host's declaration of it), main once
    assert report.text.count('label="con square"') == 2 and report.text.count('label="fun main"') == 1, report.text
    assert report.text.count("digraph") == 1 and report.text.rstrip().endswith("}")


def test_errors_do_not_poison_the_next_file() -> None:
    bad = ILL_TYPED[0]
    assert not driver.check(str(bad), []).ok
    assert driver.check(str(driver.DEMO_PROGRAM), []).ok
