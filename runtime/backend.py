"""`GpuBackend`: real device memory and kernels behind the interpreter's `gpu.*` operations.

For `verimim run --target gpu`, host code stays on verimim's reference interpreter; every block
of address space 1 (global memory) gets a twin on the device, copies move bytes between the
interpreter's host `Block.data` and that device memory, and `gpu.launch` runs the kernel compiled
by verimim.runtime.nvptx (PTX loaded with the CUDA driver) instead of interpreting work-items.

The interface is in interpreter terms (`Block`, `Ptr`, stream handles as ints, 0 = the default
stream), so the interpreter can call it directly; `install(machine, backend)` wires it into a
`Machine` by wrapping the registered `gpu.*` (and host `mem.*` global-memory) semantics, without
changing the interpreter: the interpreter's own checks (session, streams, address spaces, pending
asynchronous work) still run first.

Semantics (SEMANTICS.md "The GPU"): `.block` operations and default-stream launches are ordered
after all earlier work (the backend synchronizes the device and applies pending device→host
copies first, as the interpreter's `complete_all` does); `.asyn` copies and launches on other
streams are issued on that stream and complete at `stream_sync`, a `.block` operation or `deinit`.
A device→host copy writes the interpreter block (and its initialisation shadow) when it
completes.

Limits: a pointer stored *in* memory that is copied to the device (a `mem.Ptr` inside a copied
type) is `E-UNSUPPORTED` (the interpreter encodes pointers as block ids); kernels with more than
1024 work-items per group are `E-UNSUPPORTED` (one CUDA block per group).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimim.diagnostics import Loc, VerimimError
from verimim.ir.defs import App, Arr, Axiom, Def, Sigma

if TYPE_CHECKING:
    from verimim.interp.machine import Machine
    from verimim.interp.memory import Block, Ptr
    from verimim.ir.world import World
    from verimim.runtime.cuda import Context
    from verimim.runtime.lowering import KernelInfo
    from verimim.runtime.nvptx import DeviceModule

MAX_ITEMS = 1024
_CTYPES = {1: ctypes.c_uint8, 8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}


def _unsupported(msg: str, loc: Loc | None = None) -> VerimimError:
    return VerimimError("E-UNSUPPORTED", msg, loc)


@dataclass
class _PendingRead:
    """A device→host copy on a stream, applied to the interpreter block when it completes."""

    stage: bytearray
    block: Block
    offset: int


@dataclass
class _Loaded:
    dm: DeviceModule
    module: Any
    functions: dict[str, Any] = field(default_factory=dict)


class GpuBackend:
    """Device memory, streams and kernels for one run of a program."""

    def __init__(self, device_world: World | None, *, sm: str | None = None, ordinal: int = 0,
                 ctx: Context | None = None) -> None:
        self.device_world = device_world
        self.sm = sm
        self.ordinal = ordinal
        self.ctx = ctx
        self._own_ctx = ctx is None
        self.dptr: dict[int, int] = {}  # interpreter Block.id → device pointer
        self.streams: dict[int, Any] = {}  # interpreter stream handle → CUstream (0: default)
        self.pending: dict[int, list[Any]] = {}  # stream handle → _PendingRead / host buffers
        self._loaded: dict[int, _Loaded] = {}  # param_align → loaded module
        self.launches = 0

    # ------------------------------------------------------------------ session

    def init(self) -> None:
        """Open the CUDA context (idempotent; `gpu.init`)."""
        if self.ctx is None:
            from verimim.runtime.cuda import Context

            self.ctx = Context(self.ordinal)
        if self.sm is None:
            self.sm = self.ctx.sm()
        self.streams.setdefault(0, self.ctx.default_stream())

    def deinit(self) -> None:
        """`gpu.deinit`: wait for all streams and apply their pending copies."""
        if self.ctx is not None:
            self.sync_all()

    def close(self) -> None:
        """Free what is left on the device, destroy streams, release the context."""
        ctx = self.ctx
        if ctx is None:
            return
        try:
            self.sync_all()
        finally:
            for p in self.dptr.values():
                try:
                    ctx.mem_free(p)
                except VerimimError:
                    pass
            self.dptr.clear()
            for h, s in list(self.streams.items()):
                if h != 0:
                    try:
                        ctx.stream_destroy(s)
                    except VerimimError:
                        pass
            self.streams = {}
            for ld in self._loaded.values():
                try:
                    ctx.unload_module(ld.module)
                except VerimimError:
                    pass
            self._loaded.clear()
            if self._own_ctx:
                ctx.close()
                self.ctx = None

    def _need_ctx(self) -> Context:
        if self.ctx is None:
            self.init()
        assert self.ctx is not None
        return self.ctx

    # ------------------------------------------------------------------ streams

    def stream(self, handle: int) -> Any:
        ctx = self._need_ctx()
        if handle == 0:
            return self.streams.setdefault(0, ctx.default_stream())
        s = self.streams.get(handle)
        if s is None:
            raise VerimimError("E-INTERNAL", f"GPU backend: unknown stream handle {handle}", None)
        return s

    def stream_init(self, handle: int) -> None:
        self.streams[handle] = self._need_ctx().stream_create()

    def stream_deinit(self, handle: int) -> None:
        """`gpu.stream_deinit`: work already issued still completes (as with cuStreamDestroy)."""
        if handle == 0:
            return
        self.stream_sync(handle)
        s = self.streams.pop(handle, None)
        if s is not None:
            self._need_ctx().stream_destroy(s)

    def stream_sync(self, handle: int) -> None:
        ctx = self._need_ctx()
        if handle in self.streams:
            ctx.stream_sync(self.streams[handle])
        self._apply(handle)

    def sync_all(self) -> None:
        ctx = self._need_ctx()
        ctx.synchronize()
        for h in list(self.pending):
            self._apply(h)

    def _apply(self, handle: int) -> None:
        for p in self.pending.pop(handle, []):
            if isinstance(p, _PendingRead):
                n = len(p.stage)
                p.block.data[p.offset:p.offset + n] = p.stage
                p.block.init[p.offset:p.offset + n] = b"\x01" * n

    # ------------------------------------------------------------------ memory

    def alloc(self, block: Block) -> int:
        """A device twin for an interpreter block of global memory (`gpu.alloc.*`)."""
        if block.space != 1:
            raise VerimimError("E-INTERNAL", f"GPU backend: allocating a block in address space {block.space}", block.loc)
        d = self._need_ctx().mem_alloc(block.size)
        self.dptr[block.id] = d
        return d

    def free(self, block: Block, stream: int | None = None) -> None:
        """`gpu.free.*`: frees the twin after earlier work on that stream (or all work)."""
        d = self.dptr.pop(block.id, None)
        if d is None:
            return
        if stream is None:
            self.sync_all()
        else:
            self.stream_sync(stream)
        self._need_ctx().mem_free(d)

    def device_ptr(self, p: Ptr) -> int:
        d = self.dptr.get(p.block.id)
        if d is None:
            raise _unsupported(f"a pointer into the {p.block.describe()}, which has no device memory "
                               f"(only gpu.alloc'd global memory can reach a kernel)", p.block.loc)
        return d + p.offset

    def copy_to_device(self, src: Ptr, dst: Ptr, size: int, stream: int | None = None,
                       t: Def | None = None) -> None:
        """Host `src` (interpreter bytes) → device twin of `dst`; `stream` None: blocking."""
        _no_pointers(t)
        ctx = self._need_ctx()
        data = bytes(src.block.data[src.offset:src.offset + size])
        if stream is None:
            self.sync_all()
            ctx.memcpy_htod(self.device_ptr(dst), data, size)
        else:
            keep = ctx.memcpy_htod(self.device_ptr(dst), data, size, stream=self.stream(stream))
            self.pending.setdefault(stream, []).append(keep)
            self._default_stream_done(stream)

    def copy_to_host(self, src: Ptr, dst: Ptr, size: int, stream: int | None = None,
                     t: Def | None = None) -> None:
        """Device twin of `src` → host `dst` (interpreter bytes, marked initialised)."""
        _no_pointers(t)
        ctx = self._need_ctx()
        if stream is None:
            self.sync_all()
            stage = bytearray(size)
            ctx.memcpy_dtoh(stage, self.device_ptr(src), size)
            dst.block.data[dst.offset:dst.offset + size] = stage
            dst.block.init[dst.offset:dst.offset + size] = b"\x01" * size
        else:
            stage = bytearray(size)
            ctx.memcpy_dtoh(stage, self.device_ptr(src), size, stream=self.stream(stream))
            self.pending.setdefault(stream, []).append(_PendingRead(stage, dst.block, dst.offset))
            self._default_stream_done(stream)

    def _default_stream_done(self, stream: int) -> None:
        """An `.asyn` copy on the default stream is completed when the host goes on. The
        interpreter keeps it pending (SEMANTICS.md: a host access that conflicts with it is
        E-RACE, reported before this backend runs), so a program without such a conflict gives
        the same result either way; completing it here keeps the host's view of its target
        simple (CUDA's copies between the device and pageable host memory do the same)."""
        if stream == 0:
            self.stream_sync(0)

    def read_device(self, p: Ptr, size: int) -> bytes:
        """The current device bytes behind a global pointer (synchronizes; for tests)."""
        self.sync_all()
        out = bytearray(size)
        self._need_ctx().memcpy_dtoh(out, self.device_ptr(p), size)
        return bytes(out)

    # ------------------------------------------------------------------ kernels

    def module(self, param_align: int = 16) -> _Loaded:
        ld = self._loaded.get(param_align)
        if ld is None:
            from verimim.runtime.nvptx import compile_device_module

            if self.device_world is None:
                raise _unsupported("a launch, but the program has no device World: its pipeline does not run "
                                   "`gpu.split_apply`, which the code generators need")
            ctx = self._need_ctx()
            dm = compile_device_module(self.device_world, self.sm or "sm_90", param_align=param_align)
            ld = _Loaded(dm, ctx.load_module(dm.ptx))
            self._loaded[param_align] = ld
        return ld

    def kernel_info(self, name: str) -> KernelInfo:
        info = self.module().dm.kernels.get(name)
        if info is None:
            raise _unsupported(f"launching `{name}`, which is not a kernel of the device World")
        return info

    def launch(self, kernel: str, n_groups: int, n_items: int, stream: int, args: Any,
               shared_bytes: int = 0, loc: Loc | None = None) -> None:
        """`gpu.launch`: run `kernel` on n_groups CUDA blocks of n_items threads, with the
        interpreter value `args` (the launch's argument tuple) and `shared_bytes` of dynamic
        shared memory (the layout size of MT when m = tt, else 0)."""
        if n_items > MAX_ITEMS:
            raise _unsupported(f"a launch of {n_items} work-items per group (CUDA allows {MAX_ITEMS})", loc)
        if n_groups >= 2**31 or n_groups == 0 or n_items == 0:
            if n_groups == 0 or n_items == 0:
                return
            raise _unsupported(f"a launch of {n_groups} groups", loc)
        info = self.kernel_info(kernel)
        values, ptrs = self._marshal(info, args, loc)
        align = 16 if all(p % 16 == 0 for p in ptrs) else 1
        ld = self.module(align)
        fn = ld.functions.get(kernel)
        ctx = self._need_ctx()
        if fn is None:
            fn = ctx.get_function(ld.module, kernel)
            if shared_bytes > 48 * 1024:
                ctx.set_max_dynamic_shared(fn, shared_bytes)
            ld.functions[kernel] = fn
        if stream == 0 and self.pending:
            self.sync_all()  # pending device→host copies complete before a default-stream launch
        ctx.launch(fn, n_groups, n_items, values, shared_bytes, self.stream(stream))
        self.launches += 1

    def _marshal(self, info: KernelInfo, args: Any, loc: Loc | None) -> tuple[list[Any], list[int]]:
        from verimim.interp.memory import Ptr
        from verimim.interp.values import Stream

        values: list[Any] = []
        ptrs: list[int] = []
        for p in info.params:
            v = args
            for i in p.path:
                v = v[i]
            if p.kind == "ptr":
                if v is None:
                    d = 0
                elif isinstance(v, Ptr):
                    if v.block.space != p.space:
                        raise _unsupported(f"passing a pointer into address space {v.block.space} as a "
                                           f"kernel argument of address space {p.space}", loc)
                    d = self.device_ptr(v)
                else:
                    raise _unsupported(f"the kernel argument {v!r} where a pointer is expected", loc)
                ptrs.append(d)
                values.append(ctypes.c_uint64(d))
            elif p.kind == "stream":
                values.append(ctypes.c_uint64(v.handle if isinstance(v, Stream) else int(v)))
            else:
                values.append(_CTYPES[p.bits](int(v) % (1 << max(p.bits, 8))))
        return values, ptrs


def _no_pointers(t: Def | None) -> None:
    if t is not None and _has_ptr(t):
        from verimim.printer import show

        raise _unsupported(f"copying a `{show(t)}` between host and device: it holds pointers, which "
                           f"the interpreter and the device represent differently", t.loc)


def _has_ptr(t: Def) -> bool:
    if isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.Ptr":
        return True
    if isinstance(t, Sigma):
        return any(_has_ptr(f) for f in t.ops)
    if isinstance(t, Arr):
        return _has_ptr(t.body)
    return False


# ----------------------------------------------------------------------------- wiring


def install(machine: Machine, backend: GpuBackend) -> None:
    """Make `machine` run kernels and device memory on `backend`, by wrapping its registered
    `gpu.*` semantics (and host `mem.malloc`/`mem.alloc`/`mem.free` of global memory). The
    interpreter's checks run first (they raise as before); the device work follows."""
    from verimim.interp.memory import Ptr
    from verimim.plug import gpu_interp
    from verimim.plug.mem_interp import loc_of

    sem = machine.semantics
    orig = dict(sem)
    machine.state["gpu_backend"] = backend

    def wrap(annex: str, after: Any) -> None:
        arity, fn = orig[annex]

        def run(m: Any, th: Any, args: list[Any], node: App | None) -> Any:
            res = fn(m, th, args, node)
            after(m, th, args, node, res)
            return res
        sem[annex] = (arity, run)

    def on_init(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        backend.init()

    def on_deinit(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        backend.deinit()

    def on_alloc(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        p = res[1]
        if isinstance(p, Ptr) and p.block.space == 1 and not th.device:
            backend.alloc(p.block)

    def on_alloc_block(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        # blocking, as the interpreter's (which completed its pending copies): earlier device
        # work finishes first, and device→host copies still pending reach the host now
        if not th.device and backend.ctx is not None:
            backend.sync_all()
        on_alloc(m, th, args, node, res)

    def on_free(asyn: bool) -> Any:
        def after(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
            rest = args[1]
            p = rest[1]
            if isinstance(p, Ptr) and p.block.space == 1 and not th.device:
                backend.free(p.block, _handle(rest[2]) if asyn else None)
        return after

    def on_copy(to_device: bool, asyn: bool) -> Any:
        def after(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
            t, rest = args
            size = m.memory.layout(t, loc_of(node)).size
            stream = _handle(rest[4]) if asyn else None
            if to_device:
                backend.copy_to_device(rest[2], rest[3], size, stream, t)
            else:
                backend.copy_to_host(rest[2], rest[3], size, stream, t)
        return after

    def on_stream_init(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        backend.stream_init(gpu_interp.state(m).next_handle - 1)

    def on_stream_deinit(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        backend.stream_deinit(_handle(args[0][2]))

    def on_stream_sync(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        backend.stream_sync(_handle(args[0][2]))

    def launch(m: Any, th: Any, args: list[Any], node: App | None) -> Any:
        from verimim.interp.values import Closure

        loc = loc_of(node)
        _implicit, config, kernel, kargs, mems = args
        n_groups, n_items, s, dyn_flag, mt = config
        gpu_interp.need_session(m, node, "gpu.launch")
        h = gpu_interp.need_stream(m, s, node, "gpu.launch")
        if th.device:
            raise VerimimError("E-UNSUPPORTED", "a kernel launching a kernel", loc)
        if not isinstance(kernel, Closure):
            raise VerimimError("E-UNSUPPORTED", f"launching {kernel!r}, not a continuation", loc)
        if h == gpu_interp.DEFAULT_STREAM:
            gpu_interp.complete_all(m)
        gpu_interp.state(m).launches += 1
        shared = m.memory.layout(mt, loc).size if dyn_flag else 0
        backend.launch(kernel.mut.name or "kernel", n_groups, n_items, h, kargs, shared, loc)
        return mems

    for a in ("gpu.init", "gpu.auto_init"):
        wrap(a, on_init)
    for a in ("gpu.deinit", "gpu.auto_deinit"):
        wrap(a, on_deinit)
    wrap("gpu.alloc.block", on_alloc_block)
    for a in ("gpu.alloc.asyn", "mem.alloc", "mem.malloc"):
        wrap(a, on_alloc)
    wrap("gpu.free.block", on_free(False))
    wrap("gpu.free.asyn", on_free(True))
    wrap("mem.free", _mem_free_after(backend))
    wrap("gpu.copy_to_device.block", on_copy(True, False))
    wrap("gpu.copy_to_device.asyn", on_copy(True, True))
    wrap("gpu.copy_to_host.block", on_copy(False, False))
    wrap("gpu.copy_to_host.asyn", on_copy(False, True))
    wrap("gpu.stream_init", on_stream_init)
    wrap("gpu.stream_deinit", on_stream_deinit)
    wrap("gpu.stream_sync", on_stream_sync)
    sem["gpu.launch"] = (orig["gpu.launch"][0], launch)


def _mem_free_after(backend: GpuBackend) -> Any:
    from verimim.interp.memory import Ptr

    def after(m: Any, th: Any, args: list[Any], node: App | None, res: Any) -> None:
        p = args[1][1]
        if isinstance(p, Ptr) and p.block.space == 1 and not th.device:
            backend.free(p.block)
    return after


def _handle(s: Any) -> int:
    from verimim.interp.values import Stream

    return s.handle if isinstance(s, Stream) else int(s)


def run_on_gpu(path: str, args: list[str] | None = None, include: list[str] | None = None,
               fuel: int | None = None, backend: GpuBackend | None = None) -> tuple[int, list[Any]]:
    """Run a .mim program with host code interpreted and kernels on the GPU: (result, warnings)."""
    from verimim.frontend.loader import load_program
    from verimim.interp.machine import DEFAULT_FUEL, Machine, find_main

    from verimim.runtime.pipeline import split_program

    world, _unit = load_program(path, include or [])
    prog = split_program(world)  # the host code after the plan: its launches fit the device kernels
    be = backend or GpuBackend(prog.device)
    machine = Machine(prog.host, fuel=fuel or DEFAULT_FUEL, device=prog.device)
    install(machine, be)
    try:
        result = machine.run_main(find_main(prog.host), [path, *(args or [])])
    finally:
        if backend is None:
            be.close()
    return result, machine.warnings
