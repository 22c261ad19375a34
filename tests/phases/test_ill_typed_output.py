"""A phase whose output is ill-typed is `refuted` (E-SPEC), whatever its specification says of
the values: verimim.phases.runner checks every World a phase built (verimim.ir.typecheck), as
upstream MimIR's `World::app` checks every application it builds. A valid program is not."""
from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import PROGRAMS
from tests.ir.test_typecheck import replace
from verimim.driver import load, run_with_big_stack
from verimim.ir.defs import Def
from verimim.phases.base import PhaseResult, Program, apps_of
from verimim.phases.btensor import Builder
from verimim.phases.pipeline import PHASES
from verimim.phases.runner import PipelineRun, run_pipeline

VALID = PROGRAMS / "valid"


def check(name: str) -> PipelineRun:
    def go() -> PipelineRun:
        world = load(str(VALID / name), [])[0]
        return run_pipeline(world, timeout_ms=10_000)
    return run_with_big_stack(go)


def entry(run: PipelineRun, name: str) -> dict[str, Any]:
    (e,) = [e for e in run.phases if e["name"] == name]
    return e


def fewer_items_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated kernel declares `item_id: Idx 2` where the launch runs 3 work-items per
    group (gpu.launch demands `Idx n_items`): the back ends mask the ids, one cell is never
    written, and the values the specification reads are the same."""
    con = Builder.con

    def declare_two(self: Builder, name: str, params: list[Def], loc: Any, names: Any = None) -> Any:
        if names is not None and "item_id" in names:
            params = list(params)
            params[names.index("item_id")] = self.w.idx_n(2)
        return con(self, name, params, loc, names)

    monkeypatch.setattr(Builder, "con", declare_two)


def test_a_kernel_that_declares_fewer_work_items_than_the_launch_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    fewer_items_declared(monkeypatch)
    run = check("btensor_row_sums.mim")
    e = entry(run, "gpu.lower_btensor_map_reduce")
    assert e["status"] == "refuted", e
    assert "ill-typed" in e["detail"] and "gpu.launch" in e["detail"], e["detail"]
    assert "`Bool` where `Idx 3` is expected" in e["detail"], e["detail"]
    (spec,) = [d for d in run.diagnostics if d.code == "E-SPEC"]
    assert spec.loc is not None and spec.loc.line > 0  # at the map-reduce that was lowered
    assert run.stopped


def test_any_phase_whose_output_loads_another_type_than_the_pointee_is_refuted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    phase = PHASES["compile.cleanup"]
    apply = type(phase).apply

    def corrupt(self: Any, prog: Program) -> PhaseResult:
        res = apply(self, prog)
        w = res.after.host
        if w is not prog.host:
            for ld in apps_of(w, "mem.load", 2):  # `mem.load @(I32, 0)` → `mem.load @(I8, 0)`
                bad = w.app(w.app(ld.head, w.tuple([w.idx_n(2**8), w.lit_nat(0)])), ld.arg)
                bad.loc = ld.loc
                replace(w, ld, bad)
                break
        return res

    monkeypatch.setattr(type(phase), "apply", corrupt)
    run = check("load_before_free.mim")
    e = entry(run, "compile.cleanup")
    assert e["status"] == "refuted", e
    assert "its output is ill-typed" in e["detail"] and "mem.load @(I8, 0)" in e["detail"], e["detail"]
    assert isinstance(e["counterexample"], dict) and "location" in e["counterexample"]
    assert any(d.code == "E-SPEC" and "compile.cleanup" in d.message for d in run.diagnostics)


@pytest.mark.parametrize("name", ["btensor_row_sums.mim", "load_before_free.mim"])
def test_valid_programs_are_not_refuted(name: str) -> None:
    run = check(name)
    assert not [e for e in run.phases if e["status"] == "refuted"], run.phases
    assert not any(d.code == "E-SPEC" for d in run.diagnostics)


def test_an_ill_typed_application_a_phase_built_and_the_normalizers_folded_is_refuted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fold's proof would encode `1I8` where a 32-bit operand is declared (a Z3 sort error,
    E-INTERNAL); the ill-typed application is refuted before."""
    phase = PHASES["compile.cleanup"]
    apply = type(phase).apply

    def fold_ill_typed(self: Any, prog: Program) -> PhaseResult:
        res = apply(self, prog)
        w = res.after.host
        if w is not prog.host and w.folds is not None:
            add = apps_of(w, "core.wrap.add", 3)[0]
            w.app(add.callee, w.tuple([w.lit_idx(2**32, 1), w.lit_idx(2**8, 1)]))  # ↦ 2I32
        return res

    monkeypatch.setattr(type(phase), "apply", fold_ill_typed)
    run = check("load_before_free.mim")
    e = entry(run, "compile.cleanup")
    assert e["status"] == "refuted" and "ill-typed" in e["detail"] and "`[I32, I8]`" in e["detail"], e
    assert not any(d.code == "E-INTERNAL" for d in run.diagnostics)
