"""The interpreter gives the same result before and after every phase of the pipeline
("pass versus previous"), on every well-defined program of the corpus."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS, annotations
from verimim.driver import load, run_with_big_stack
from verimim.interp.machine import Machine, find_main
from verimim.phases.base import Program
from verimim.phases.runner import run_pipeline

VALID = [p for p in sorted((PROGRAMS / "valid").glob("*.mim")) if "EXPECT" in annotations(p)]


def result(prog: Program, args: list[str]) -> int:
    m = Machine(prog.host, device=prog.device)
    return m.run_main(find_main(prog.host), args)


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_every_phase_preserves_the_result(path: Path) -> None:
    ann = annotations(path)
    args = [str(path), *ann.get("ARGS", "").split()]
    expected = int(ann["EXPECT"])

    def go() -> list[tuple[str, int]]:
        world, _ = load(str(path), [])
        run = run_pipeline(world, verify=False)
        assert not run.stopped, [d.render() for d in run.diagnostics]
        seen = [("source", result(Program(world), args))]
        for res in run.results:
            if res.skipped is None:
                seen.append((res.label, result(res.after, args)))
        return seen

    for name, value in run_with_big_stack(go):
        assert value == expected, f"after {name}: {value} != {expected}"
