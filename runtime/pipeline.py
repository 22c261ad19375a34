"""The compile pipeline without verification, and without importing z3.

`verimim.phases.runner.run_pipeline` imports `verimim.smt` (and so z3) at module import time,
even with `verify=False`. The GPU machine has no z3, so the runtime runs the phases itself:
the same default pipeline and sub-pipelines, each phase's rejection reported as a
`VerimimError` (the first error diagnostic).
"""
from __future__ import annotations

from verimim.diagnostics import VerimimError
from verimim.ir.world import World
from verimim.phases.base import Program
from verimim.phases.pipeline import PHASES, default_pipeline, run_on_side, sub_pipelines


def split_program(world: World, host_phases: list[str] | None = None,
                  device_phases: list[str] | None = None) -> Program:
    """Run the default pipeline (split_apply and the sub-pipelines included) unverified."""
    prog = Program(world)
    host_sub, dev_sub = sub_pipelines(world, host_phases, device_phases)
    steps: list[tuple[str, str | None]] = [(n, None) for n in default_pipeline()]
    steps += [(n, "host") for n in host_sub] + [(n, "device") for n in dev_sub]
    for name, side in steps:
        phase = PHASES.get(name)
        if phase is None:
            raise VerimimError("E-USAGE", f"unknown phase `{name}`", None)
        if side is not None and prog.device is None:
            continue
        res = run_on_side(phase, prog, side) if side else phase.apply(prog)
        if res.rejected:
            d = next(d for d in res.diagnostics if d.severity == "error")
            raise VerimimError(d.code, d.message, d.loc)
        prog = res.after
    return prog


def device_world_of(path: str, include: list[str] | None = None) -> tuple[World, World | None]:
    """Load a .mim file and split it: (host World, device World or None)."""
    from verimim.frontend.loader import load_program

    world, _unit = load_program(path, include or [])
    prog = split_program(world)
    return prog.host, prog.device
