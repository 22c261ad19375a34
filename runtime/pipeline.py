"""The compile pipeline without verification (and so without z3, which the GPU machine lacks):
what the GPU backend needs to get a program's device World. The phases are the program's plan
(verimim.phases.plan), the same that `check` proves."""
from __future__ import annotations

from verimim.diagnostics import VerimimError
from verimim.ir.world import World
from verimim.phases.base import Program
from verimim.phases.plan import PipelinePlan
from verimim.phases.runner import PipelineRun, run_pipeline


def run_plan(world: World, plan: PipelinePlan | None = None) -> PipelineRun:
    """Run the plan (by default the program's own) unverified; a rejection is raised as its
    first error diagnostic."""
    run = run_pipeline(world, verify=False, plan=plan)
    errors = [d for d in run.diagnostics if d.severity == "error"]
    if errors:
        d = errors[0]
        raise VerimimError(d.code, d.message, d.loc)
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
