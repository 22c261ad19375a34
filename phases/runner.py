"""Running the pipeline with every phase's specification (what `verimim check` does).

The phases are those of the program's plan (verimim.phases.plan); `gpu.split_apply` is followed
by the host and device sub-pipelines, each on its side, and the backend phases end the run. A
fixed-point group (`compile.phases tt (…)`) repeats until a round leaves the program as it was
(at most MAX_FIXPOINT_ROUNDS rounds). A step the plan marks skipped (a phase verimim does not
implement) is reported `skipped` with its reason.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimim.diagnostics import Diagnostic, Loc
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program
from verimim.phases.base import Phase
from verimim.phases.pipeline import PHASES, PrefixCleanup as PrefixCleanupPhase, run_on_side
from verimim.phases.plan import PipelinePlan, build_plan
from verimim.phases.program_pipeline import MAX_FIXPOINT_ROUNDS, Fixpoint, PipelineSpec, PrefixCleanup, Skip, Step
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
    pipeline: dict[str, Any] = field(default_factory=dict)  # the plan and what ran, for the report
    ran: list[str] = field(default_factory=list)  # the phases applied, `name[side]`, in order

    @property
    def earlier(self) -> list[Program]:
        """The programs before each phase that changed it, first to last (not the final one)."""
        out: list[Program] = []
        for r in self.results:
            if r.before.host is not self.program.host and all(r.before.host is not p.host for p in out):
                out.append(r.before)
        return out


    @property
    def kernels_program(self) -> Program:
        """The program whose kernels `check` verifies for races and divergence: the final host
        (its launches and streams) with the kernels as split_apply made them, before the
        device-side phases. Those may remove what the checks must report: remove_double_syncs
        drops a barrier before any memory operation (the seed's rule), and with it the
        divergence of a kernel that reaches that barrier on some work-items only. Removing
        undefined behaviour refines the program, but the program the user wrote still has it."""
        for r in self.results:
            if r.side == "device" and r.before.device is not None:
                return Program(self.program.host, r.before.device)
        return self.program


def run_pipeline(world: World, *, verify: bool = True, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 emit_dir: Path | None = None, host_phases: list[str] | None = None,
                 device_phases: list[str] | None = None, until: str | None = None,
                 pipeline: PipelineSpec | None = None, plan: PipelinePlan | None = None) -> PipelineRun:
    """Run the program's plan (built here from the overrides unless given), stopping after
    `until` when given, checking each phase against its specification when `verify`."""
    run = PipelineRun(Program(world), ctx=SpecContext(timeout_ms, emit_dir), verify=verify, until=until)
    if plan is None:
        plan = build_plan(world, pipeline, host_phases, device_phases)
    host, device = list(plan.host), list(plan.device)
    if verify and world.folds is not None:
        _prove_folds(run, world)
    _run_steps(run, list(plan.main), None, host, device)
    _run_steps(run, list(plan.backend), "host", host, device)
    run.pipeline = {**plan.describe(), "ran": run.ran}
    return run


def _prove_folds(run: PipelineRun, world: World) -> None:
    """`core.normalize`: the normalizers' folds while the program was built, each proved."""
    from verimim.smt.spec_normalize import NAME, entry  # z3 only when verifying

    e, at = entry(world, run.ctx)
    run.phases.append(e)
    if e["status"] == "refuted":
        run.diagnostics.append(Diagnostic("E-SPEC", f"`{NAME}` violates its specification: {e['detail']}",
                                          at.loc if at is not None else None))


def _run_steps(run: PipelineRun, steps: list[Step], side: str | None,
               host: list[Step], device: list[Step]) -> None:
    for step in steps:
        if run.stopped or run.done:
            return
        if isinstance(step, Fixpoint):
            _run_fixpoint(run, step, side, host, device)
            continue
        if isinstance(step, Skip):
            _report_skip(run, step, side)
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


def _with_output_folds(run: PipelineRun, res: PhaseResult, entry: dict[str, Any]) -> None:
    """A phase's verdict covers its output as built: the folds the normalizers made while the
    phase built its World (`k - 3` once a β-reduction made k a literal) are proved as the front
    end's are (`core.normalize`). A phase's own specification builds its reference with the same
    normalizers, so a wrong fold there agreed with itself and was `proved`."""
    from verimim.smt.spec_normalize import prove_folds

    before = {id(w) for w in res.before.worlds()}
    undecided: list[str] = []
    for w in _built(res.after.worlds(), before):
        out, at = prove_folds(w, run.ctx)
        if out.status == "refuted":
            cex = dict(out.counterexample or {})
            if at is not None and at.loc is not None:
                cex["location"] = f"{at.loc.file}:{at.loc.line}:{at.loc.col}"
            entry.update(status="refuted", detail=f"a fold by the normalizers in its output: {out.detail}",
                         counterexample=cex)
            return
        if out.status == "unknown":
            undecided.append(out.detail)
    # (a `validated` phase was shown by running its output, folds included: it stays so)
    if undecided and entry["status"] in ("proved", "bounded"):
        entry.update(status="unknown", detail=f"{entry['detail']}; but of the folds by the normalizers in its "
                     f"output, {'; '.join(undecided)}")


def _built(outputs: list[World], inputs: set[int]) -> list[World]:
    """The Worlds a phase built, with folds: its outputs and the Worlds between them and its
    inputs (`origin`: an inlining round's World, whose folds the next round's copies as literals)."""
    out: list[World] = []
    seen: set[int] = set(inputs)
    for w in outputs:
        cur: World | None = w
        while cur is not None and id(cur) not in seen:
            seen.add(id(cur))
            if cur.folds:
                out.append(cur)
            cur = cur.origin
    return out


def ill_typed_output(res: PhaseResult) -> dict[str, Any] | None:
    """A phase's output must be a program: every application's argument fits its callee's
    domain (verimim.ir.typecheck), as upstream MimIR's `World::app` asserts of every application
    it builds. The specifications read values, not types: an output that launches a kernel that
    declares `Idx 2` work-items for a launch of 4, or loads an `I32` through a pointer to `I8`,
    could satisfy them and still compile to other code. The refutation (the entry's fields), or None where every World
    the phase built is well typed (a World it passed on unchanged was checked where it was built)."""
    from verimim.ir.typecheck import check_world

    before = res.before.worlds()
    for side, world in (("host", res.after.host), ("device", res.after.device)):
        if world is None or any(world is w for w in before):
            continue
        bad = check_world(world, stop_at=1)
        if not bad:
            continue
        cex: dict[str, Any] = {"application": bad[0].shown}
        if bad[0].loc is not None and bad[0].loc.line:
            cex["location"] = f"{bad[0].loc.file}:{bad[0].loc.line}:{bad[0].loc.col}"
        if _in_its_input(res, bad[0]):
            return {"status": "rejected", "detail": f"the program is ill-typed: {bad[0].message}",
                    "counterexample": None, "ill_typed": bad[0]}
        where = f" ({side} World)" if res.after.device is not None else ""
        return {"status": "refuted", "detail": f"its output{where} is ill-typed: {bad[0].message}",
                "counterexample": cex}
    return None


def _in_its_input(res: PhaseResult, bad: Any) -> bool:
    """Whether the phase's input holds the same ill-typed application: then the program is at
    fault, not the phase. The front end solves an implicit argument without comparing universe
    levels, as upstream's `Checker::alpha_` sets a hole (`core.bitcast I32 t` of a `t: *`
    solves `{S: *}` to `*`); upstream's `World::app` rejects that application when a phase
    rebuilds it, which is the program's type error (exit 1), not the phase's (E-SPEC, exit 3)."""
    from verimim.ir.typecheck import check_world

    return any((b.shown, b.message, b.loc) == (bad.shown, bad.message, bad.loc)
               for w in res.before.worlds() for b in check_world(w))


def _report_skip(run: PipelineRun, step: Skip, side: str | None) -> None:
    entry: dict[str, Any] = {"name": step.name, "status": "skipped", "time_s": 0.0, "detail": step.reason,
                             "counterexample": None}
    if side:
        entry["side"] = side
    run.phases.append(entry)
    if run.until is not None and run.until in (step.name, f"{step.name}[{side}]"):
        run.done = True  # after a step that does nothing, the program is as it was before it


_LOCATION = re.compile(r"(.+):(\d+):(\d+)")


def spec_location(counterexample: Any) -> Loc | None:
    """Where a refuted specification's counterexample points (its `location`, `file:line:col`):
    the E-SPEC diagnostic's position, so that --json and SARIF place it too."""
    where = counterexample.get("location") if isinstance(counterexample, dict) else None
    m = _LOCATION.fullmatch(where) if isinstance(where, str) else None
    if m is None or int(m.group(2)) == 0:
        return None
    return Loc(m.group(1), int(m.group(2)), int(m.group(3)))


def _judges_rejections(name: str) -> bool:
    from verimim.smt.specs import JUDGES_REJECTIONS

    return name in JUDGES_REJECTIONS


def _run_phase(run: PipelineRun, step: str | PrefixCleanup, side: str | None) -> None:
    phase: Phase | None = PrefixCleanupPhase(step.prefix, step.loc) if isinstance(step, PrefixCleanup) else PHASES.get(step)
    if phase is None:
        run.diagnostics.append(Diagnostic("E-USAGE", f"unknown phase `{step}`; known: {', '.join(sorted(PHASES))}", None))
        run.stopped = True
        return
    name = phase.name
    t0 = time.perf_counter()
    if side == "device" and run.program.device is None:
        res = PhaseResult(name, run.program, run.program, skipped="no device World (nothing was split)",
                          by_pipeline=True)
    elif side == "host" and run.program.device is None:
        # Nothing was split (no kernel): the one World is all host code.
        res = phase.apply(run.program)
        res.side = "host"
    elif side is None and phase.host_only and run.program.device is not None:
        # named in `_compile` after the split: host code is the host World (the device World's
        # kernels would get host operations)
        res = run_on_side(phase, run.program, "host")
    else:
        res = run_on_side(phase, run.program, side) if side else phase.apply(run.program)
    run.results.append(res)
    entry: dict[str, Any] = {"name": name, "status": "", "time_s": 0.0, "detail": "", "counterexample": None}
    if side or res.side:
        entry["side"] = side or res.side
    if res.skipped and run.verify and not res.by_pipeline:
        from verimim.smt.spec_skips import check_skip  # a phase that did nothing must show why

        out = check_skip(res)
        entry.update(status=out.status, detail=out.detail)
        if out.status == "refuted":
            run.diagnostics.append(Diagnostic("E-SPEC", f"`{name}` violates its specification: {out.detail}",
                                              spec_location(out.counterexample)))
    elif res.skipped:
        entry.update(status="skipped", detail=res.skipped)
    elif res.rejected and run.verify and _judges_rejections(name):
        # A checker's rejection is the program's fault (exit 1) only where its specification
        # agrees that every operation it reported can violate; else the checker is at fault.
        from verimim.smt.specs import check_spec

        out = check_spec(res, run.ctx)
        if out.status == "refuted":
            entry.update(status="refuted", detail=out.detail, counterexample=out.counterexample,
                         z3_s=round(out.z3_s, 4))
            run.diagnostics.append(Diagnostic("E-SPEC", f"`{name}` violates its specification: {out.detail}",
                                              spec_location(out.counterexample)))
        else:
            entry.update(status="rejected", detail="; ".join(d.message for d in res.diagnostics[:3]))
            run.diagnostics.extend(res.diagnostics)
    elif res.rejected:
        entry.update(status="rejected", detail="; ".join(d.message for d in res.diagnostics[:3]))
        run.diagnostics.extend(res.diagnostics)
    elif run.verify:
        from verimim.smt.specs import check_spec  # z3 only when verifying

        ill = ill_typed_output(res)
        if ill is not None and ill["status"] == "rejected":
            bad = ill.pop("ill_typed")
            entry.update(ill)
            run.diagnostics.append(Diagnostic("E-TYPE", f"{ill['detail']} (upstream's `World::app` rejects the "
                                              f"application `{bad.shown}` when `{name}` rebuilds it)", bad.loc))
        elif ill is not None:
            entry.update(ill)
        else:
            out = check_spec(res, run.ctx)
            entry.update(status=out.status, detail=out.detail, counterexample=out.counterexample,
                         z3_s=round(out.z3_s, 4))
            if out.status != "refuted":
                _with_output_folds(run, res, entry)
        if entry["status"] == "refuted":
            run.diagnostics.append(Diagnostic("E-SPEC", f"`{name}` violates its specification: {entry['detail']}",
                                              spec_location(entry["counterexample"])))
    else:
        entry.update(status="skipped", detail="verification off")
    run.diagnostics.extend(d for d in res.diagnostics if d.severity != "error" and d not in run.diagnostics)
    entry["time_s"] = round(time.perf_counter() - t0, 4)
    run.phases.append(entry)
    if not res.skipped:
        run.ran.append(res.label)
    if res.rejected or entry["status"] in ("refuted", "rejected"):
        run.stopped = True
        return
    run.program = res.after
    if run.until is not None and run.until in (name, res.label):  # (`name[device]`: that side's)
        run.done = True
