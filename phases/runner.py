"""Running the pipeline with every phase's specification (what `verimim check` does)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimim.diagnostics import Diagnostic
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program
from verimim.phases.pipeline import PHASES, default_pipeline, run_on_side, sub_pipelines
from verimim.smt.solver import DEFAULT_TIMEOUT_MS, SpecContext


@dataclass
class PipelineRun:
    program: Program
    phases: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    results: list[PhaseResult] = field(default_factory=list)
    ctx: SpecContext = field(default_factory=SpecContext)
    stopped: bool = False


def run_pipeline(world: World, *, verify: bool = True, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 emit_dir: Path | None = None, host_phases: list[str] | None = None,
                 device_phases: list[str] | None = None, until: str | None = None) -> PipelineRun:
    """Run the default pipeline (stopping after `until` when given), checking each phase."""
    run = PipelineRun(Program(world), ctx=SpecContext(timeout_ms, emit_dir))
    host_sub, dev_sub = sub_pipelines(world, host_phases, device_phases)
    steps: list[tuple[str, str | None]] = [(n, None) for n in default_pipeline()]
    steps += [(n, "host") for n in host_sub] + [(n, "device") for n in dev_sub]
    for name, side in steps:
        phase = PHASES.get(name)
        if phase is None:
            run.diagnostics.append(Diagnostic("E-USAGE", f"unknown phase `{name}`; known: {', '.join(sorted(PHASES))}", None))
            run.stopped = True
            return run
        t0 = time.perf_counter()
        if side is not None and run.program.device is None:
            res = PhaseResult(name, run.program, run.program, skipped="no device World (nothing was split)")
        else:
            res = run_on_side(phase, run.program, side) if side else phase.apply(run.program)
        run.results.append(res)
        entry: dict[str, Any] = {"name": name if side is None else name, "status": "", "time_s": 0.0,
                                 "detail": "", "counterexample": None}
        if side:
            entry["side"] = side
        if res.skipped:
            entry.update(status="skipped", detail=res.skipped)
        elif res.rejected:
            entry.update(status="rejected", detail="; ".join(d.message for d in res.diagnostics[:3]))
            run.diagnostics.extend(res.diagnostics)
        elif verify:
            from verimim.smt.specs import check_spec  # z3 only when verifying

            out = check_spec(res, run.ctx)
            entry.update(status=out.status, detail=out.detail, counterexample=out.counterexample,
                         z3_s=round(out.z3_s, 4))
            if out.status == "refuted":
                run.diagnostics.append(Diagnostic("E-SPEC", f"`{name}` violates its specification: {out.detail}", None))
        else:
            entry.update(status="skipped", detail="verification off")
        run.diagnostics.extend(d for d in res.diagnostics if d.severity != "error" and d not in run.diagnostics)
        entry["time_s"] = round(time.perf_counter() - t0, 4)
        run.phases.append(entry)
        if res.rejected or entry["status"] == "refuted":
            run.stopped = True
            return run
        run.program = res.after
        if until is not None and name == until:
            return run
    return run
