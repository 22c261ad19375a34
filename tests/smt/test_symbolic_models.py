"""Tests of the symbolic explorer's kept assignments (smt.symbolic.Explorer._sat): a feasibility
query a satisfying assignment of an earlier path makes true is answered without the solver,
and exploring finds exactly the paths it finds when it always asks."""
from __future__ import annotations

import pytest

import verimim.smt.symbolic as symbolic
from verimim.smt.symbolic import Explorer


def explore(ex: Explorer) -> list[tuple[str, ...]]:
    x, _ = ex.var("x", 0, 255)
    y, _ = ex.var("y", 0, 255)

    def program() -> int:
        out = 0
        if x < 100:
            out += 1
        if y < x:  # feasible both ways on either side of the first branch
            out += 2
        if x + y > 600:  # never: both are below 256
            out += 4
        return out
    return sorted((str(p.outcome),) + tuple(str(c) for c in p.conditions) for p in ex.run(program))


def test_kept_assignments_answer_queries_and_the_paths_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = Explorer()
    with_models = explore(kept)
    assert kept.known_feasible > 0
    monkeypatch.setattr(symbolic, "KEPT_MODELS", 0)
    asked = Explorer()
    always_asked = explore(asked)
    assert asked.known_feasible == 0
    assert asked.feasibility_queries == kept.feasibility_queries + kept.known_feasible
    assert with_models == always_asked
    assert {p[0] for p in with_models} == {"0", "1", "2", "3"}  # x + y > 600 is never taken



def _branching(ex: Explorer) -> list[symbolic.Path[int]]:
    xs = [ex.var(f"x{i}", 0, 1)[0] for i in range(5)]
    return ex.run(lambda: sum(1 for x in xs if x < 1))


def test_an_exploration_past_its_time_budget_stops_with_a_symbolic_error() -> None:
    # (a kernel whose every round branches on an unknown counter ran `check` for minutes)
    assert len(_branching(Explorer(budget_s=60.0))) == 32
    with pytest.raises(symbolic.SymbolicError, match="time budget of 0 s"):
        _branching(Explorer(budget_s=0.0))
