"""The compile pipeline without verification (and so without z3, which the GPU machine lacks):
what the GPU backend needs to get a program's device World. The phases are the program's plan
(verimim.phases.plan), the same that `check` proves."""
from __future__ import annotations

from typing import Any

from verimim.diagnostics import VerimimError
from verimim.ir.world import World
from verimim.phases.base import Program
from verimim.phases.plan import PipelinePlan
from verimim.phases.runner import PipelineRun, run_pipeline


def run_plan(world: World, plan: PipelinePlan | None = None, data: dict[str, Any] | None = None) -> PipelineRun:
    """Run the plan (by default the program's own) unverified; a rejection is raised with every
    error diagnostic of it (as `check` reports them, their notes too). `data` (a report's) gets
    the plan that ran as `pipeline`, a rejected one too."""
    run = run_pipeline(world, verify=False, plan=plan)
    if data is not None:
        data["pipeline"] = run.pipeline
    errors = [VerimimError(d.code, d.message, d.loc, d.related) for d in run.diagnostics if d.severity == "error"]
    if errors:
        errors[0].also = errors[1:]  # type: ignore[attr-defined]  (VerimimError.diagnostics reads it)
        raise errors[0]
    return run


def split_program(world: World, plan: PipelinePlan | None = None) -> Program:
    """The program after its plan: host World and device World (None when nothing was split)."""
    return run_plan(world, plan).program


def device_world_of(path: str, include: list[str] | None = None) -> tuple[World, World | None]:
    """Load a .mim file and split it: (host World, device World or None)."""
    from verimim.frontend.loader import load_program

    world, _unit = load_program(path, include or [])
    prog = split_program(world)
    return prog.host, prog.device
