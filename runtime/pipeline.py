"""The compile pipeline without verification (and so without z3, which the GPU machine lacks):
what the GPU backend needs to get a program's device World."""
from __future__ import annotations

from verimim.diagnostics import VerimimError
from verimim.ir.world import World
from verimim.phases.base import Program
from verimim.phases.runner import run_pipeline


def split_program(world: World, host_phases: list[str] | None = None,
                  device_phases: list[str] | None = None) -> Program:
    """Run the default pipeline (split_apply and the sub-pipelines included) unverified; a
    rejection is raised as its first error diagnostic."""
    run = run_pipeline(world, verify=False, host_phases=host_phases, device_phases=device_phases)
    errors = [d for d in run.diagnostics if d.severity == "error"]
    if errors:
        d = errors[0]
        raise VerimimError(d.code, d.message, d.loc)
    return run.program


def device_world_of(path: str, include: list[str] | None = None) -> tuple[World, World | None]:
    """Load a .mim file and split it: (host World, device World or None)."""
    from verimim.frontend.loader import load_program

    world, _unit = load_program(path, include or [])
    prog = split_program(world)
    return prog.host, prog.device
