"""Running the pipeline with every phase's specification (what `verimim check` does).

The pipeline is the default one of PHASES.md, or the program's own (`_compile`), or one from a
pipeline file; `gpu.split_apply` is followed by the host and device sub-pipelines, each on its
side. A fixed-point group (`compile.phases tt (…)`) repeats until a round leaves the program as
it was (at most MAX_FIXPOINT_ROUNDS rounds).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimim.diagnostics import Diagnostic
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program
from verimim.phases.pipeline import PHASES, default_pipeline, run_on_side, sub_pipelines
from verimim.phases.program_pipeline import (
    MAX_FIXPOINT_ROUNDS, Fixpoint, PipelineSpec, Step, merge, spec_from_definitions,
)
from verimim.smt.solver import DEFAULT_TIMEOUT_MS, SpecContext


@dataclass
class PipelineRun:
    program: Program
    phases: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    results: list[PhaseResult] = field(default_factory=list)
    ctx: SpecContext = field(default_factory=SpecContext)
    stopped: bool = False
    done: bool = False  # `until` reached
    verify: bool = True
    until: str | None = None
    pipeline: dict[str, Any] = field(default_factory=dict)  # what ran, for the report


def run_pipeline(world: World, *, verify: bool = True, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 emit_dir: Path | None = None, host_phases: list[str] | None = None,
                 device_phases: list[str] | None = None, until: str | None = None,
                 pipeline: PipelineSpec | None = None) -> PipelineRun:
    """Run the pipeline (stopping after `until` when given), checking each phase."""
    run = PipelineRun(Program(world), ctx=SpecContext(timeout_ms, emit_dir), verify=verify, until=until)
    spec = spec_from_definitions(world, world.pipeline_defs, "the program")
    if pipeline is not None:
        spec = merge(spec, pipeline)
    host_default, dev_default = sub_pipelines(world, None, None)
    main: list[Step] = spec.main if spec.main is not None else list(default_pipeline())
    host: list[Step] = list(host_phases) if host_phases is not None else (
        spec.host if spec.host is not None else list(host_default))
    device: list[Step] = list(device_phases) if device_phases is not None else (
        spec.device if spec.device is not None else list(dev_default))
    run.pipeline = {"main": _describe(main), "host": _describe(host), "device": _describe(device),
                    "from": spec.source}
    _run_steps(run, main, None, host, device)
    return run


def _describe(steps: list[Step]) -> list[Any]:
    return [{"fixpoint": _describe(list(s.steps))} if isinstance(s, Fixpoint) else s for s in steps]


def _run_steps(run: PipelineRun, steps: list[Step], side: str | None,
               host: list[Step], device: list[Step]) -> None:
    for step in steps:
        if run.stopped or run.done:
            return
        if isinstance(step, Fixpoint):
            _run_fixpoint(run, step, side, host, device)
            continue
        _run_phase(run, step, side)
        if step == "gpu.split_apply" and side is None and not (run.stopped or run.done):
            _run_steps(run, host, "host", host, device)
            _run_steps(run, device, "device", host, device)


def _run_fixpoint(run: PipelineRun, group: Fixpoint, side: str | None,
                  host: list[Step], device: list[Step]) -> None:
    for _ in range(MAX_FIXPOINT_ROUNDS):
        before = _fingerprint(run.program)
        _run_steps(run, list(group.steps), side, host, device)
        if run.stopped or run.done or _fingerprint(run.program) == before:
            return
    run.diagnostics.append(Diagnostic("W-FIXPOINT", f"a `compile.phases tt` group still changed the "
                                      f"program after {MAX_FIXPOINT_ROUNDS} rounds; stopped there", None,
                                      "note"))


def _fingerprint(prog: Program) -> str:
    from verimim.dump import dump_world

    return "\n".join(dump_world(w, []) for w in prog.worlds())


def _run_phase(run: PipelineRun, name: str, side: str | None) -> None:
    phase = PHASES.get(name)
    if phase is None:
        run.diagnostics.append(Diagnostic("E-USAGE", f"unknown phase `{name}`; known: {', '.join(sorted(PHASES))}", None))
        run.stopped = True
        return
    t0 = time.perf_counter()
    if side == "device" and run.program.device is None:
        res = PhaseResult(name, run.program, run.program, skipped="no device World (nothing was split)")
    elif side == "host" and run.program.device is None:
        # Nothing was split (no kernel): the one World is all host code.
        res = phase.apply(run.program)
        res.log["side"] = "host"
    else:
        res = run_on_side(phase, run.program, side) if side else phase.apply(run.program)
    run.results.append(res)
    entry: dict[str, Any] = {"name": name, "status": "", "time_s": 0.0, "detail": "", "counterexample": None}
    if side:
        entry["side"] = side
    if res.skipped:
        entry.update(status="skipped", detail=res.skipped)
    elif res.rejected:
        entry.update(status="rejected", detail="; ".join(d.message for d in res.diagnostics[:3]))
        run.diagnostics.extend(res.diagnostics)
    elif run.verify:
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
        return
    run.program = res.after
    if run.until is not None and name == run.until:
        run.done = True
