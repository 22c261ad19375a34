"""The host runtime behind compiled host code, and running a compiled program.

Compiled host code (verimim.runtime.host) calls the C-ABI entry points of `host.RUNTIME`; here
they are Python functions behind ctypes callbacks, registered with llvmlite's JIT by name, and
they drive the device through cuda-python (verimim.runtime.cuda): `cuInit` and the primary
context, `cuModuleLoadData` of the program's PTX, `cuMemAlloc`/`cuMemAllocAsync`, copies,
`cuLaunchKernel`, streams and frees. No z3 is needed on this path.

A callback must not raise through C: the first failure is kept, every later runtime call does
nothing, and the failure is raised when `main` returns. Device memory still allocated then is
freed and streams are destroyed; the context is released.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import VerimimError
from verimim.ir.world import World
from verimim.phases.plan import PipelinePlan
from verimim.runtime.c_host import LIBC_SYMBOLS
from verimim.runtime.host import BLOCKING, ENTRY, RUNTIME, HostModule, emit_host, verify_ir
from verimim.runtime.lowering import KernelInfo, llvm_binding
from verimim.runtime.nvptx import DeviceModule, optimize

MAX_ITEMS = 1024
_CT: dict[str, Any] = {"void": None, "i64": ctypes.c_int64, "i32": ctypes.c_int32, "ptr": ctypes.c_void_p}


@dataclass
class CompiledProgram:
    host: HostModule
    device: DeviceModule | None
    device_world: World | None = None
    variants: dict[int, DeviceModule] = field(default_factory=dict)  # parameter alignment → module
    pipeline: dict[str, Any] = field(default_factory=dict)  # the plan that produced it, and what ran

    def device_for(self, align: int) -> DeviceModule:
        """The device module compiled for pointer arguments aligned to `align` bytes."""
        assert self.device is not None and self.device_world is not None
        if align == self.device.param_align:
            return self.device
        dm = self.variants.get(align)
        if dm is None:
            from verimim.runtime.nvptx import compile_device_module

            dm = self.variants[align] = compile_device_module(self.device_world, self.device.sm, param_align=align)
        return dm

    def kernel_info(self, name: str) -> KernelInfo | None:
        return self.device.kernels.get(name) if self.device is not None else None


def compile_program(world: World, sm: str = "sm_90", plan: PipelinePlan | None = None,
                    data: dict[str, Any] | None = None) -> CompiledProgram:
    """Frontend output → the program's plan (unverified; `buffer.lower_ptr` is part of every
    plan) → device PTX and host LLVM IR. `data` (a report's) gets the plan that ran as
    `pipeline` before the code is generated (a program the plan rejects, or whose code the back
    end refuses, was refused after it ran)."""
    from verimim.runtime.nvptx import compile_device_module
    from verimim.runtime.pipeline import run_plan

    run = run_plan(world, plan, data)
    prog = run.program
    dm = None
    if prog.device is not None and any(k.body is not None for k in prog.device.externals.values()):
        dm = compile_device_module(prog.device, sm)
    host = emit_host(prog.host, dm.kernels if dm is not None else {})
    verify_ir(host.llvm_ir)
    return CompiledProgram(host, dm, prog.device, pipeline=run.pipeline)


# ----------------------------------------------------------------------------- runtime


@dataclass
class _Module:
    handle: Any
    functions: dict[str, Any] = field(default_factory=dict)


class HostRuntime:
    """Device state of one run of compiled host code."""

    def __init__(self, program: CompiledProgram, ordinal: int = 0, sm: str | None = None) -> None:
        self.program = program
        self.ordinal = ordinal
        self.sm = sm
        self.ctx: Any = None
        self.error: BaseException | None = None
        self.streams: dict[int, Any] = {}
        self.next_handle = 1
        self.allocs: set[int] = set()
        self.modules: dict[int, _Module] = {}  # parameter alignment → loaded module
        self._default: Any = None  # the default stream's handle object, made once
        self.callbacks: dict[str, Any] = {}
        for name, (ret, params) in RUNTIME.items():
            if not name.startswith("verimim_rt_"):
                continue
            impl = getattr(self, "_" + name[len("verimim_rt_"):])
            proto = ctypes.CFUNCTYPE(_CT[ret], *[_CT[p] for p in params])
            self.callbacks[name] = proto(self._guard(impl, ret))

    def _guard(self, fn: Callable[..., Any], ret: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            if self.error is None:
                try:
                    out = fn(*args)
                    return 0 if out is None and ret != "void" else out
                except BaseException as e:  # noqa: BLE001 — nothing may unwind through C
                    self.error = e
            return 0 if ret != "void" else None
        return run

    # ------------------------------------------------------------------ entry points

    def _need(self) -> Any:
        if self.ctx is None:
            raise VerimimError("E-GPU-SESSION", "a gpu operation before `gpu.init`", None)
        return self.ctx

    def _init(self) -> None:
        if self.ctx is None:
            from verimim.runtime.cuda import Context

            self.ctx = Context(self.ordinal)
            self.sm = self.sm or self.ctx.sm()

    def _deinit(self) -> None:
        self._need().synchronize()

    def _stream(self, h: int) -> Any:
        if h == 0:
            if self._default is None:
                self._default = self._need().default_stream()
            return self._default
        s = self.streams.get(h)
        if s is None:
            raise VerimimError("E-STREAM", f"stream {h} is not initialised", None)
        return s

    def _dalloc(self, nbytes: int, stream: int) -> int:
        ctx = self._need()
        if stream == BLOCKING:
            p = ctx.mem_alloc(nbytes)
        else:
            from verimim.runtime.cuda import check

            p = int(check(ctx.cu.cuMemAllocAsync(max(nbytes, 1), self._stream(stream)), "cuMemAllocAsync"))
        self.allocs.add(p)
        return p

    def _dfree(self, p: int, stream: int) -> None:
        ctx = self._need()
        self.allocs.discard(p)
        if stream == BLOCKING:
            ctx.mem_free(p)
            return
        from verimim.runtime.cuda import check

        check(ctx.cu.cuMemFreeAsync(p, self._stream(stream)), "cuMemFreeAsync")

    def _htod(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy("cuMemcpyHtoD", dst, src, nbytes, stream)

    def _dtoh(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy("cuMemcpyDtoH", dst, src, nbytes, stream)

    def _copy(self, fn: str, dst: int, src: int, nbytes: int, stream: int) -> None:
        """A copy by the driver's `fn` (blocking), or its `…Async` form on a stream."""
        if nbytes == 0:
            return
        from verimim.runtime.cuda import check

        cu = self._need().cu
        if stream == BLOCKING:
            check(getattr(cu, fn)(dst, src, nbytes), fn)
        else:
            check(getattr(cu, fn + "Async")(dst, src, nbytes, self._stream(stream)), fn + "Async")

    def _stream_init(self, slot: int) -> None:
        s = self._need().stream_create()
        h = self.next_handle
        self.next_handle += 1
        self.streams[h] = s
        ctypes.c_uint64.from_address(slot).value = h

    def _stream_deinit(self, h: int) -> None:
        if h == 0:
            return  # `gpu.default_stream` is not made by stream_init: nothing to end (as backend.py)
        s = self._stream(h)
        ctx = self._need()
        ctx.stream_sync(s)
        ctx.stream_destroy(s)
        del self.streams[h]

    def _stream_sync(self, h: int) -> None:
        self._need().stream_sync(self._stream(h))

    def _function(self, kid: int, align: int, shared: int) -> int:
        """The CUfunction of kernel `kid` compiled for pointer arguments aligned to `align`
        bytes (16, or 1 when some pointer is not), as verimim.runtime.backend chooses; compiled
        code keeps it per launch site and calls `cuLaunchKernel` itself."""
        name = self.program.host.kernels[kid]
        if self.program.kernel_info(name) is None:
            raise VerimimError("E-UNSUPPORTED", f"launching `{name}`, which was not compiled", None)
        ctx = self._need()
        mod = self.modules.get(align)
        if mod is None:
            mod = self.modules[align] = _Module(ctx.load_module(self.program.device_for(align).ptx))
        fn = mod.functions.get(name)
        if fn is None:
            fn = mod.functions[name] = ctx.get_function(mod.handle, name)
        if shared > 48 * 1024:
            ctx.set_max_dynamic_shared(fn, shared)
        return _handle(fn)

    def _stream_handle(self, h: int) -> int:
        return _handle(self._stream(h))

    def _launch_failed(self, kid: int, groups: int, items: int, rc: int) -> None:
        name = self.program.host.kernels[kid]
        if rc == -1:
            raise VerimimError("E-UNSUPPORTED", f"a launch of `{name}` on {groups} groups of {items} "
                               f"work-items (CUDA allows at most {MAX_ITEMS} per group and 2^31 - 1 groups)", None)
        from verimim.runtime.cuda import CudaError, check

        check((self._need().cu.CUresult(rc),), f"cuLaunchKernel({name})")
        raise CudaError(f"cuLaunchKernel({name}) failed with {rc}")

    # ------------------------------------------------------------------ teardown

    def close(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        try:
            ctx.synchronize()
        except Exception:  # noqa: BLE001 — best effort after a failure
            pass
        for p in list(self.allocs):
            try:
                ctx.mem_free(p)
            except Exception:  # noqa: BLE001
                pass
        for s in self.streams.values():
            try:
                ctx.stream_destroy(s)
            except Exception:  # noqa: BLE001
                pass
        for m in self.modules.values():
            try:
                ctx.unload_module(m.handle)
            except Exception:  # noqa: BLE001
                pass
        self.allocs.clear()
        self.streams.clear()
        self.modules.clear()
        self._default = None
        ctx.close()
        self.ctx = None


# ----------------------------------------------------------------------------- JIT


@dataclass
class JittedMain:
    engine: Any
    fn: Callable[[int, Any], int]
    runtime: HostRuntime


def jit(program: CompiledProgram, runtime: HostRuntime | None = None, opt: int = 2) -> JittedMain:
    """JIT-compile the host module with llvmlite's MCJIT, binding the runtime's entry points."""
    llvm = llvm_binding()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    rt = runtime or HostRuntime(program)
    libc = ctypes.CDLL(None)
    for name in LIBC_SYMBOLS:  # mem.malloc/free and the C functions programs declare
        llvm.add_symbol(name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
    for name, cb in rt.callbacks.items():
        llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)
    if '@"cuLaunchKernel"' in program.host.llvm_ir:
        llvm.add_symbol("cuLaunchKernel", _driver_symbol("cuLaunchKernel"))
    mod = verify_ir(program.host.llvm_ir)
    tm = llvm.Target.from_default_triple().create_target_machine(opt=opt)
    if opt:
        optimize(mod, tm, opt)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    addr = engine.get_function_address(ENTRY)
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)(addr)
    return JittedMain(engine, fn, rt)


def _driver_symbol(name: str) -> int:
    """The address of a CUDA driver entry point (libcuda, the library cuda-python drives)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise VerimimError("E-USAGE", f"the compiled program launches kernels, but the CUDA driver "
                           f"library cannot be loaded: {e}", None) from None
    addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    assert addr is not None
    return addr


def _handle(obj: Any) -> int:
    """The raw pointer value of a cuda-python driver handle (CUfunction, CUstream)."""
    try:
        return int(obj)
    except TypeError:
        return int(obj.getPtr())


@contextlib.contextmanager
def captured_stdout(out: bytearray | None) -> Iterator[None]:
    """Everything written on file descriptor 1 meanwhile (by C's stdio too: flushed before and
    after) goes to `out` (dropped when None) instead of this process's standard output, which
    stays free for `--json`."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:  # a file, not a pipe: any amount of output, no reader
        os.dup2(tmp.fileno(), 1)
        try:
            yield
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            data = tmp.read()
            if out is not None:
                out += data


def run_jitted(jm: JittedMain, argv: list[str], out: bytearray | None = None) -> int:
    """Call the compiled `main` with C's argc/argv; raise the runtime's first failure. What the
    program prints is appended to `out`."""
    raw = [os.fsencode(a) for a in argv]  # the bytes given (a non-UTF-8 argument is surrogate-escaped)
    arr = (ctypes.c_char_p * (len(raw) + 1))(*raw, None)
    try:
        with captured_stdout(out):
            result = jm.fn(len(raw), ctypes.cast(arr, ctypes.c_void_p))
    finally:
        err = jm.runtime.error
        jm.runtime.close()
    if err is not None:
        if isinstance(err, VerimimError):
            raise err
        raise VerimimError("E-INTERNAL", f"the host runtime failed: {type(err).__name__}: {err}", None)
    return int(result)


def run_native(world: World, argv: list[str], sm: str | None = None, plan: PipelinePlan | None = None,
               out: bytearray | None = None) -> int:
    """Compile the program and run it natively: host code JIT-compiled, kernels on the GPU; what
    it prints is appended to `out`."""
    return run_compiled(world, argv, sm, plan, out)[0]


def run_compiled(world: World, argv: list[str], sm: str | None = None,
                 plan: PipelinePlan | None = None, out: bytearray | None = None) -> tuple[int, dict[str, Any]]:
    """`run_native`, with the pipeline that produced the code (the plan and what ran)."""
    prog = compile_program(world, sm or _device_sm(), plan)
    return run_jitted(jit(prog), argv, out), prog.pipeline


def _device_sm() -> str:
    try:
        from verimim.runtime.cuda import Context

        ctx = Context(0)
        try:
            return ctx.sm()
        finally:
            ctx.close()
    except Exception:  # noqa: BLE001 — no device: the default target
        return "sm_90"
