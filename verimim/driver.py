"""What each command does, independent of how it is invoked (CLI, pytest plugin, fuzzer).

Every entry point returns a `Report`: diagnostics plus command-specific data; no exception
escapes except `KeyboardInterrupt`. Internal errors become `E-INTERNAL` diagnostics (exit 3)
with the traceback kept for `--debug`.
"""
from __future__ import annotations

import os
import shlex
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from verimim import verdicts
from verimim.diagnostics import (Diagnostic, Related, UsageError, VerimimError, exit_code_for, ordinal,
                                 recursion_diagnostic)
from verimim.frontend.loader import Unit
from verimim.ir.world import World

T = TypeVar("T")

DEMO_PROGRAM = Path(__file__).resolve().parent / "data" / "demo.mim"

# Elaboration and printing recurse along terms; a long chain of `let`s is a deep term. A thread
# with a big C stack lets Python's recursion limit (raised in the loader) be used safely.
_STACK_BYTES = 512 * 1024 * 1024


def run_with_big_stack(fn: Callable[[], T]) -> T:
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        from verimim.smt import z3_threads  # Z3 is worked with on this thread only

        try:
            with z3_threads.hold():
                result.append(fn())
        except BaseException as e:  # re-raised on the calling thread
            error.append(e)

    old = threading.stack_size()
    threading.stack_size(_STACK_BYTES)
    try:
        # A daemon: Ctrl-C ends the process (cli.main) while this thread is still inside Z3.
        t = threading.Thread(target=target, name="verimim", daemon=True)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    if error:
        raise error[0]
    return result[0]


@dataclass
class Report:
    file: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    traceback: str | None = None
    text: str | None = None  # what a command prints on stdout (dump)
    output: bytes | None = None  # what the program printed, byte for byte (`data["stdout"]`: as text)

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.diagnostics)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        # data["summary"] is the one-line human summary (stderr); check's count of verdicts by
        # status is the JSON `summary`.
        out: dict[str, Any] = {"file": self.file, "ok": self.ok}
        out.update({k: v for k, v in self.data.items() if k not in ("summary", "status_summary")})
        if "status_summary" in self.data:
            out["summary"] = self.data["status_summary"]
        out["diagnostics"] = [d.to_json() for d in self.diagnostics]
        return out


def guarded(report: Report, fn: Callable[[], None]) -> Report:
    """Run a command body, turning our errors into diagnostics and anything else into E-INTERNAL."""
    try:
        run_with_big_stack(fn)
    except VerimimError as e:
        report.diagnostics.extend(e.diagnostics())
    except RecursionError as e:
        report.diagnostics.append(recursion_diagnostic(e))
        if report.diagnostics[-1].code == "E-INTERNAL":
            report.traceback = traceback.format_exc(limit=-40)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # an internal error: reported, never shown as a bare traceback
        report.traceback = traceback.format_exc()
        report.diagnostics.append(Diagnostic("E-INTERNAL", f"internal error: {type(e).__name__}: {e}", None))
    return report


def load(path: str, include: list[str]) -> tuple[World, Unit]:
    # verimim.source: a byte-order mark accepted, encoding errors at line:col, imports kept
    # inside their search directories.
    from verimim.source import load_source

    return load_source(path, include)


def _pipeline_file(pipeline: str | None, include: list[str], program: World) -> Any:
    if pipeline is None:
        return None
    from verimim.phases.program_pipeline import load_pipeline_file

    return load_pipeline_file(pipeline, include, program)


def plan_for(world: World, include: list[str], host_phases: list[str] | None = None,
             device_phases: list[str] | None = None, pipeline: str | None = None) -> Any:
    """The one pipeline plan of a program and the overrides: every command runs this one."""
    from verimim.phases.plan import build_plan

    return build_plan(world, _pipeline_file(pipeline, include, world), host_phases, device_phases)


STATUSES = ("proved", "bounded", "validated", "unknown", "refuted", "skipped", "rejected")


def status_summary(statuses: Iterable[str]) -> dict[str, int]:
    """How many verdicts reached each status (spec/CLI.md's statuses, every one present)."""
    counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return counts


def check(path: str, include: list[str], timeout_ms: int | None = None, emit_smt2: str | None = None,
          host_phases: list[str] | None = None, device_phases: list[str] | None = None,
          pipeline: str | None = None) -> Report:
    """Parse, type-check, run the compile pipeline proving each phase against its specification."""
    from verimim.phases.runner import run_pipeline
    from verimim.smt.solver import DEFAULT_TIMEOUT_MS

    report = Report(path)
    report.data["phases"] = []
    report.data["kernels"] = []

    def body() -> None:
        world, unit = load(path, include)
        from verimim.phases.base import walk
        from verimim.plug.c_lib import declaration_errors

        misfits = declaration_errors(walk(world))  # what `run` and `compile` reject at the declaration
        if misfits:
            report.diagnostics.extend(e.diagnostic() for e in misfits)
            return
        run = run_pipeline(world, timeout_ms=timeout_ms or DEFAULT_TIMEOUT_MS,
                           emit_dir=Path(emit_smt2) if emit_smt2 else None,
                           plan=plan_for(world, include, host_phases, device_phases, pipeline))
        report.data["phases"] = run.phases
        report.data["pipeline"] = run.pipeline
        report.diagnostics.extend(run.diagnostics)
        if not run.stopped:  # races and barrier divergence of every launched kernel
            from verimim.smt.kernel_verify import verify_kernels

            kernels = verify_kernels(run.kernels_program, run.ctx, path, earlier=run.earlier)
            report.data["kernels"] = kernels.entries
            report.diagnostics.extend(kernels.diagnostics)
        # every verdict, as the text summary counts them
        report.data["status_summary"] = status_summary(v.status for v in verdicts.of_check(path, report.data,
                                                                                            report.diagnostics))
        report.data["z3"] = {"queries": run.ctx.queries, "time_s": round(run.ctx.z3_s, 4),
                             "slowest": {"time_s": round(run.ctx.slowest[0], 4), "query": run.ctx.slowest[1]}}
        if any(d.code == "E-SPEC" for d in run.diagnostics):
            timeout = [] if timeout_ms is None else ["--timeout", f"{timeout_ms / 1000:g}"]
            report.data["reproducer"] = reproducer("check", path, include, host_phases, device_phases, pipeline,
                                                   [*timeout, "--json"])

    return guarded(report, body)


def run(path: str, include: list[str], args: list[str], fuel: int | None = None, seed: int = 0,
        target: str = "interp", host: str = "native", host_phases: list[str] | None = None,
        device_phases: list[str] | None = None, pipeline: str | None = None,
        max_work_items: int | None = None) -> Report:
    """Compile and execute `main`: on the reference interpreter, or on the GPU with the host code
    compiled natively (`host="native"`, through llvmlite's JIT) or interpreted (`host="interp"`).
    Compiling runs the program's plan (unverified: proofs are `check`'s), so a program a checker
    phase rejects is not run (exit 1, as `check`). The interpreter then runs the source program,
    the reference meaning, which `verimim diff` compares with every phase's output; the GPU runs
    what the plan produces, the plan that `check` proves."""
    from verimim.interp.machine import DEFAULT_FUEL, DEFAULT_MAX_WORK_ITEMS, Machine, find_main
    from verimim.plug.gpu_interp import LaunchTooLarge

    report = Report(path)
    report.data["target"] = target
    limit = max_work_items or DEFAULT_MAX_WORK_ITEMS
    report.data["pipeline"] = None

    def body() -> None:
        if target == "gpu":
            _need_a_device("--target gpu")  # before any work (docs/cli.md: exit 2 is found first)
        world, unit = load(path, include)
        backend = None
        if target == "gpu":
            # The GPU detects no undefined behaviour: the reference interpreter runs first, and a
            # program with an error diagnostic has no defined result to run on the GPU.
            oracle = Machine(world, fuel=fuel or DEFAULT_FUEL, seed=seed, max_work_items=limit)
            try:
                report.data["interp_result"] = oracle.run_main(find_main(world, path), [path, *args])
            except LaunchTooLarge as e:
                # Too big to interpret first: the GPU runs it unchecked, and says so.
                report.diagnostics.append(Diagnostic(
                    "W-UNCHECKED", f"not run on the interpreter first: this launch has {e.size}, more than "
                    f"--max-work-items ({e.limit}); undefined behaviour in it goes unnoticed", e.loc, "warning"))
            report.diagnostics.extend(oracle.warnings)
            report.data["host"] = host
            plan = plan_for(world, include, host_phases, device_phases, pipeline)
            report.data["pipeline"] = plan.describe()
            if host == "native":
                from verimim.runtime.hostrt import run_native

                out = bytearray()
                try:
                    report.data["result"] = run_native(world, [path, *args], out=out, plan=plan)
                finally:
                    _keep_output(report, out)
                return
            from verimim.runtime.backend import GpuBackend, install
            from verimim.runtime.pipeline import run_plan

            planned = run_plan(world, plan)
            report.data["pipeline"] = planned.pipeline
            # the host code the plan produced: its launches pass what the device kernels take
            # (a kernel's lifted captures among them), as the compiled host code's do
            machine = Machine(planned.program.host, fuel=fuel or DEFAULT_FUEL, seed=seed, max_work_items=limit,
                              device=planned.program.device)
            backend = GpuBackend(planned.program.device)
            install(machine, backend)
        else:
            from dataclasses import replace as replaced

            from verimim.phases.runner import run_pipeline

            # The plan up to the code generators: the backend's lowering (buffer.lower_ptr) is
            # for compiled targets, and what it cannot compile the interpreter still runs.
            plan = replaced(plan_for(world, include, host_phases, device_phases, pipeline), backend=())
            compiled = run_pipeline(world, verify=False, plan=plan)
            report.data["pipeline"] = compiled.pipeline
            rejected = [d for d in compiled.diagnostics if d.severity == "error"]
            if rejected:
                report.diagnostics.extend(rejected)
                return
            machine = Machine(world, fuel=fuel or DEFAULT_FUEL, seed=seed, max_work_items=limit)
        try:
            result = machine.run_main(find_main(machine.world, path), [path, *args])
        finally:
            if backend is None:
                report.diagnostics.extend(machine.warnings)
            report.data["steps"] = machine.steps
            _keep_output(report, machine.stdout)  # what it printed, even before a fault
            if backend is not None:
                backend.close()
        report.data["result"] = result

    guarded(report, body)
    # Warnings found before an error stay; the error comes first.
    report.diagnostics.sort(key=lambda d: d.severity != "error")
    return report


def _keep_output(report: Report, data: bytes | bytearray) -> None:
    """What the program printed: its bytes (printed by `run`) and, for JSON, as text."""
    report.output, report.data["stdout"] = bytes(data), program_output(data)


def program_output(data: bytes | bytearray) -> str:
    """What a program wrote on its standard output, as text (JSON carries no raw bytes: bytes
    that are not UTF-8 become U+FFFD)."""
    return bytes(data).decode("utf-8", "replace")


def compile_to(path: str, include: list[str], out: str, sm: str = "sm_90", host_phases: list[str] | None = None,
               device_phases: list[str] | None = None, pipeline: str | None = None) -> Report:
    """Write OUT.ll (host LLVM IR) and OUT.ptx (device PTX; an empty module without kernels),
    compiled from what the program's plan produces."""
    report = Report(path)
    if Path(out).suffix in (".ll", ".ptx"):  # `-o prog.ll` names prog.ll and prog.ptx, not prog.ll.ll
        out = out[:-len(Path(out).suffix)]  # (a name that is only `.ll` has no suffix: a hidden file)
    ll, ptx = Path(out + ".ll"), Path(out + ".ptx")

    def body() -> None:
        from verimim.interp.machine import find_main
        from verimim.runtime.hostrt import compile_program
        from verimim.runtime.nvptx import empty_ptx

        _check_outputs(out, ll, ptx)  # before any work (docs/cli.md: exit 2 is found first)
        world, unit = load(path, include)
        find_main(world, path)  # the host module is main's: without one, say where it is missing
        prog = compile_program(world, sm, plan_for(world, include, host_phases, device_phases, pipeline),
                               report.data)
        device = prog.device.ptx if prog.device is not None else empty_ptx(sm)
        try:
            ll.write_text(prog.host.llvm_ir)
            ptx.write_text(device)
        except OSError as e:
            ll.unlink(missing_ok=True)  # both files or neither: a lone .ll would pass for a result
            raise UsageError(f"cannot write {e.filename}: {e.strerror}") from None
        report.data["outputs"] = {"host": str(ll), "device": str(ptx)}
        report.data["kernels"] = sorted(prog.device.kernels) if prog.device is not None else []
        report.data["summary"] = f"{path}: wrote {ll} and {ptx}"

    return guarded(report, body)


def _need_a_device(option: str) -> None:
    from verimim.runtime.cuda import device_available

    if not device_available():
        raise UsageError(f"{option}: no CUDA device (or no cuda-python) is available here")


def cannot_write_into(directory: str | Path) -> str | None:
    """Why no file can be written into `directory` (None: one can), found by making one and
    dropping it: `os.access` says yes to root for /proc and /sys."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        return str(e.strerror or e)
    return None


def _check_outputs(out: str, *files: Path) -> None:
    """`-o OUT` names files verimim can write: a non-empty name (not a hidden `.ll` in the working
    directory) in a directory that exists, and no directory where a file goes."""
    if not out or out.endswith(("/", os.sep)):
        raise UsageError(f"-o `{out}`: give the output files' name without an extension (OUT.ll, OUT.ptx)")
    for f in files:
        if f.is_dir():
            raise UsageError(f"cannot write {f}: it is a directory")
        parent = f.parent if str(f.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"cannot write {f}: no directory {parent}")
        why = cannot_write_into(parent)
        if why is not None:
            raise UsageError(f"cannot write {f}: the directory {parent} is not writable ({why})")


def diff(path: str, include: list[str], args: list[str], fuel: int | None = None,
         use_gpu: bool | None = None, host_phases: list[str] | None = None,
         device_phases: list[str] | None = None, pipeline: str | None = None) -> Report:
    """Run the program on every target — the interpreter on the source, the interpreter after
    every phase, the GPU when one is present — and demand the same result and the same final
    contents of main's host blocks. A program with an error diagnostic has no defined result:
    it is skipped, saying why."""
    from verimim.interp.observe import Observation, Observations, describe, differences, observe
    from verimim.phases.runner import run_pipeline

    report = Report(path)
    targets: dict[str, Any] = {}
    report.data["targets"] = targets
    argv = [path, *args]
    # main's result, its final host heap and what it printed (verimim.interp.observe, the
    # observation the fuzz oracle and the differential specs compare too)
    aspects = ("result", "heap", "output")

    def mismatch(got: Observation, ref: Observation, target: str, subject: str, reference: str) -> None:
        diff = differences(ref, got, aspects)
        targets[target] = got.result[1] if got.ok else got.shown()
        if diff:
            report.diagnostics.append(Diagnostic(
                "E-DIFF", f"{subject} gives {got.shown()}{describe(diff)}; {reference} gives {ref.result[1]}", None))

    def body() -> None:
        if use_gpu:
            _need_a_device("--gpu")  # (a program without kernels "ran on the GPU" where there is none)
        world, unit = load(path, include)
        plan = plan_for(world, include, host_phases, device_phases, pipeline)
        ref = observe(world, argv, fuel=fuel)
        if not ref.ok:
            rejected = run_pipeline(world, verify=False, plan=plan)
            if rejected.stopped:
                # A checker phase rejects the program (a store into the const space): that is
                # its error, as `check` and `run` report it, not what the interpreter then met.
                report.data["pipeline"] = rejected.pipeline
                report.diagnostics.extend(rejected.diagnostics)
                return
            # Undefined behaviour: the user's program is at fault (exit 1) and there is nothing to
            # compare, which a note of the error says (a separate note would repeat its code).
            from verimim.plug.gpu_interp import LaunchTooLarge

            assert isinstance(ref.fault, VerimimError)
            d = ref.fault.diagnostic()
            why = ("the interpreter cannot run it" if isinstance(ref.fault, LaunchTooLarge)
                   else "the program has no defined result")
            note = Related(f"not compared on other targets: {why}", None)
            report.diagnostics.append(replace(d, related=(*d.related, note)))
            report.data["skipped"] = ref.code
            return
        targets["interp"] = ref.result[1]
        report.data["result"] = ref.result[1]
        report.diagnostics.extend(ref.warned)  # the source's warnings, as `run` reports them (W-LEAK, …)
        if ref.nondeterministic:
            # Output that depends on the clock cannot be compared; results and memory still are.
            report.diagnostics.append(Diagnostic("W-UNSUPPORTED", "the program's output is not compared "
                                                 f"across targets: {ref.nondeterministic}", None, "warning"))
        run = run_pipeline(world, verify=False, plan=plan)
        report.data["pipeline"] = run.pipeline
        report.diagnostics.extend(d for d in run.diagnostics if d.severity != "error")
        if run.stopped:
            report.diagnostics.extend(d for d in run.diagnostics if d.severity == "error")  # (warnings: above)
            return
        outputs = Observations(argv, fuel=fuel)
        times: dict[str, int] = {}  # a phase the plan runs again (a fixed-point round) is a target of its own
        for res in run.results:
            if res.skipped is not None:
                continue
            name = res.label
            n = times[name] = times.get(name, 0) + 1
            nth = "" if n == 1 else f" ({ordinal(n)} run)"
            got = outputs.of(res.after.host, res.after.device)
            mismatch(got, ref, f"interp after {name}{nth}", f"after `{name}`{nth} the program", "the source")
        want_gpu = use_gpu
        if want_gpu is None:
            from verimim.runtime.cuda import device_available

            want_gpu = device_available()
        if want_gpu:
            from verimim.runtime.backend import GpuBackend, install
            from verimim.runtime.hostrt import run_native

            # The compiled program: host code JIT-compiled, kernels on the GPU (its heap is not
            # observed: it is the native process's).
            out = bytearray()
            native = run_native(world, argv, out=out, plan=plan)
            mismatch(Observation(("ok", native), bytes(out), nondeterministic=ref.nondeterministic),
                     ref, "gpu", "the compiled program on the GPU", "the interpreter")
            # Host code interpreted, kernels on the GPU: also compares the final host memory.
            backend = GpuBackend(run.program.device)
            try:
                got = observe(run.program.host, argv, device=run.program.device, fuel=fuel,
                              prepare=lambda m: install(m, backend))
            finally:
                backend.close()
            mismatch(got, ref, "gpu (interpreted host)", "the GPU with interpreted host code", "the interpreter")
        if any(d.code == "E-DIFF" for d in report.diagnostics):
            report.data["reproducer"] = reproducer("diff", path, include, host_phases, device_phases, pipeline,
                                                   [] if fuel is None else ["--fuel", str(fuel)], args)

    return guarded(report, body)


def dump(path: str, include: list[str], dot: bool = False, after: str | None = None,
         pipeline: str | None = None) -> Report:
    """The program as Mim (or Graphviz); with `after`, as it is after that phase of the pipeline."""
    from verimim.dump import dump_dot, dump_dot_worlds, dump_unit, dump_worlds

    report = Report(path)

    def body() -> None:
        world, unit = load(path, include)
        if after is None:
            report.text = dump_dot(world, unit) if dot else dump_unit(world, unit)
            return
        from verimim.phases.pipeline import PHASES
        from verimim.phases.runner import run_pipeline
        from verimim.phases.vocabulary import resolve

        from verimim.smt.spec_normalize import NAME as FOLDS

        # `PHASE[host]` / `PHASE[device]`: that side's run in a sub-pipeline (as `pipeline.ran` says)
        base, bracket, side = after.partition("[")
        if bracket and side not in ("host]", "device]"):
            raise UsageError(f"--after: `{after}`: a side is `[host]` or `[device]`")
        name = resolve(base)
        phase = name + bracket + side
        if bracket and name == FOLDS:
            raise UsageError(f"--after: `{after}`: `{FOLDS}` has no side (the folds happen while the program is built)")
        if phase == FOLDS:
            # the normalizers fold while the program is built: after them is the program as loaded
            report.text = dump_dot(world, unit) if dot else dump_unit(world, unit)
            return
        # Phases are asked of the program's own plan: it may name steps that are not in the
        # registry (`compile.prefix_cleanup_phase` with its prefix, upstream passes verimim skips).
        run = run_pipeline(world, verify=False, until=phase, plan=plan_for(world, include, pipeline=pipeline))
        if run.stopped:
            report.diagnostics.extend(run.diagnostics)
            return
        if not run.done:
            # Printing the final program would claim it is the output of a phase that never ran.
            steps = ", ".join(dict.fromkeys(e["name"] + (f"[{e['side']}]" if e.get("side") else "")
                                            for e in run.phases)) or "none"
            if name in PHASES:
                raise UsageError(f"--after: `{after}` is not a phase of this program's pipeline; its phases: {steps}")
            raise UsageError(f"--after: unknown phase `{after}`; this program's pipeline: {steps}; "
                             f"verimim's phases: {', '.join(sorted([*PHASES, FOLDS]))}")
        report.diagnostics.extend(run.diagnostics)
        imports = [f"{i.kind} {i.name};" for i in unit.module.imports]
        # after gpu.split_apply: one module, the device World's kernels first
        worlds = [w for w in (run.program.device, run.program.host) if w is not None]
        report.text = dump_dot_worlds(worlds) if dot else dump_worlds(worlds, imports)

    return guarded(report, body)


def reproducer(command: str, path: str, include: list[str], host_phases: list[str] | None,
               device_phases: list[str] | None, pipeline: str | None, options: list[str],
               args: list[str] | tuple[str, ...] = ()) -> str:
    """The command line that runs `command` again as it ran: the search directories and the
    pipeline overrides too (without them the pipeline is another, and the failure may not
    come back), main's arguments after `--`."""
    words = ["verimim", command, path]
    for d in include:
        words += ["-I", d]
    if pipeline is not None:
        words += ["--pipeline", pipeline]
    if host_phases is not None:
        words += ["--host-phases", ",".join(host_phases)]
    if device_phases is not None:
        words += ["--device-phases", ",".join(device_phases)]
    words += options
    if args:
        words += ["--", *args]
    return shell_command(words)


def shell_command(words: list[str]) -> str:
    """A command line a POSIX shell reads back as these words: quoted, and a word holding
    bytes that are not UTF-8 (surrogate-escaped, as Python receives them) in bash's `$'\\xff'`."""
    out = []
    for w in words:
        try:
            w.encode("utf-8")
        except UnicodeEncodeError:
            out.append("$'" + "".join(f"\\x{b:02x}" for b in os.fsencode(w)) + "'")
            continue
        out.append(shlex.quote(w))
    return " ".join(out)
