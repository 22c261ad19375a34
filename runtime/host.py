"""Host World → LLVM IR for the host CPU, JIT-compiled with llvmlite.

`main` becomes `i32 @verimim_main(i32 argc, ptr argv)`; memory tokens are erased, host memory is
real (`mem.malloc`/`mem.free` are libc's, slots are `alloca`s), and every `gpu.*` operation is a
call of a small C-ABI runtime (`verimim_rt_*`, see verimim.runtime.hostrt) that drives the
device through cuda-python. A launch marshals the kernel's arguments in host code exactly as its
parameter list (`KernelInfo.params`) says and calls the driver's `cuLaunchKernel` directly, with
the `CUfunction` the runtime gave that launch site once (kept in a module global).

Control flow is verimim.runtime.cps's, shared with the kernels: continuations are basic blocks
with φ-nodes, functions are instantiated per continuation argument (tail calls are loops),
`lam`s are inlined; genuine recursion is `E-UNSUPPORTED`, as is any construct the host backend
does not know, named. C functions a program declares are called with the C ABI
(verimim.runtime.c_host).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import Loc, VerimimError
from verimim.ir.defs import App, Axiom, Def, Lit, MutLam, Tuple
from verimim.ir.world import World
from verimim.layout import NVPTX64, layout_of
from verimim.interp.entry import main_form
from verimim.interp.machine import find_main
from verimim.plug.c_lib import c_name
from verimim.runtime.c_host import CFunctions, emit_call
from verimim.runtime.cps import CpsCompiler
from verimim.runtime.cps_dyn import compile_until_static
from verimim.runtime.lowering import (
    AXIOMS, P, RET, KernelInfo, ModuleContext, literal_of, llvm_binding, show_short, unsupported,
)

ENTRY = "verimim_main"

# Runtime entry points: name → (return type, parameter types) in "i64"/"i32"/"ptr"/"void".
RUNTIME: dict[str, tuple[str, tuple[str, ...]]] = {
    "verimim_rt_init": ("void", ()),
    "verimim_rt_deinit": ("void", ()),
    "verimim_rt_dalloc": ("i64", ("i64", "i64")),             # bytes, stream (-1: blocking)
    "verimim_rt_dfree": ("void", ("i64", "i64")),             # device pointer, stream
    "verimim_rt_htod": ("void", ("i64", "ptr", "i64", "i64")),  # dst, src, bytes, stream
    "verimim_rt_dtoh": ("void", ("ptr", "i64", "i64", "i64")),  # dst, src, bytes, stream
    "verimim_rt_stream_init": ("void", ("ptr",)),             # where to write the new handle
    "verimim_rt_stream_deinit": ("void", ("i64",)),
    "verimim_rt_stream_sync": ("void", ("i64",)),
    # a launch: the CUfunction of (kernel index, pointer alignment, dynamic shared bytes), fetched
    # once per launch site; the CUstream of a stream handle (not for the default stream); a
    # failed launch (kernel index, groups, items, CUresult or -1 for a bad configuration)
    "verimim_rt_function": ("ptr", ("i64", "i64", "i64")),
    "verimim_rt_stream_handle": ("ptr", ("i64",)),
    "verimim_rt_launch_failed": ("void", ("i64", "i64", "i64", "i64")),
    # the CUDA driver's own entry point, called directly from compiled code
    "cuLaunchKernel": ("i32", ("ptr", "i32", "i32", "i32", "i32", "i32", "i32", "i32", "ptr", "ptr", "ptr")),
    "malloc": ("ptr", ("i64",)),
    "free": ("void", ("ptr",)),
}

BLOCKING = -1  # the stream argument of a `.block` operation

# runtime operand positions (in `app.args()`) of the host operations, as nvptx.AXIOMS
_HOST_AXIOMS: dict[str, tuple[int, tuple[int, ...]]] = dict(AXIOMS)
for _a in ("gpu.init", "gpu.deinit", "gpu.auto_init", "gpu.auto_deinit", "gpu.stream_init",
           "gpu.stream_deinit", "gpu.stream_sync"):
    _HOST_AXIOMS[_a] = (1, (0,))
for _a in ("gpu.alloc.block", "gpu.alloc.asyn", "gpu.free.block", "gpu.free.asyn",
           "gpu.copy_to_device.block", "gpu.copy_to_device.asyn", "gpu.copy_to_host.block",
           "gpu.copy_to_host.asyn", "mem.malloc", "mem.free", "mem.alloc"):
    _HOST_AXIOMS[_a] = (2, (1,))
del _HOST_AXIOMS["gpu.sync_work_items"]  # a barrier outside a kernel has no meaning


# ----------------------------------------------------------------------------- results


@dataclass
class HostModule:
    llvm_ir: str
    kernels: list[str] = field(default_factory=list)  # launch index → kernel name


# ----------------------------------------------------------------------------- values


class _HostCtx(ModuleContext):
    """Module-wide state for the host module: every pointer is a plain `ptr`."""

    def __init__(self, world: World) -> None:
        super().__init__(world, param_align=1)
        llvm = llvm_binding()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.module.name = "verimim_host"
        self.module.triple = llvm.get_process_triple()
        tm = llvm.Target.from_default_triple().create_target_machine()
        self.module.data_layout = str(tm.target_data)

    def llty(self, kind: tuple[str, int, int]) -> Any:
        if kind[0] == "ptr":
            return self.ptr
        return super().llty(kind)

    def runtime(self, name: str) -> Any:
        ret, params = RUNTIME[name]
        tys = {"void": self.ir.VoidType(), "i64": self.i64, "i32": self.i32, "ptr": self.ptr}
        return self.intrinsic(name, tys[ret], [tys[p] for p in params])


class _HostCompiler(CpsCompiler):
    """Compiles `main` and everything it reaches into one LLVM function (see the module doc)."""

    where = "on the host"
    dynamic_closures = True

    def __init__(self, ctx: _HostCtx, main: MutLam, kernels: dict[str, KernelInfo]) -> None:
        super().__init__(ctx, main, ENTRY, _HOST_AXIOMS)
        self.hctx = ctx
        self.kernel_infos = kernels
        self.kernel_ids: list[str] = []
        self.c_functions = CFunctions(ctx)
        self.main_ret_type: Def = ctx.world.nat()  # main's result type, set by compile_main

    # ------------------------------------------------------------------ entry

    def compile_main(self) -> None:
        ctx, ir, main = self.hctx, self.ir, self.kernel
        if main.body is None:
            raise unsupported("`main` without a body", main.loc)
        form = main_form(main)  # any of upstream's forms (verimim.interp.entry)
        self.main_ret_type = form.ret_type
        fn = ir.Function(ctx.module, ir.FunctionType(ctx.i32, [ctx.i32, ctx.ptr]), ENTRY)
        self.fn = fn
        entry = fn.append_basic_block("entry")
        self.entry_builder = ir.IRBuilder(entry)
        leaves = list(fn.args) if form.takes_args else []
        arg_v = ctx.build(form.dom, iter(leaves), iter([RET]))
        body_bb = fn.append_basic_block("main")
        self.run_body(arg_v, body_bb)
        self.entry_builder.position_at_end(entry)
        self.entry_builder.branch(body_bb)

    def _return(self, av: Any, loc: Loc | None) -> None:
        out: list[Any] = []
        self.hctx.flatten(self.main_ret_type, av, out, loc)
        if len(out) != 1 or getattr(out[0], "type", None) != self.hctx.i32:
            raise unsupported("a return from `main` without an I32 result", loc)
        self.builder.ret(out[0])

    def _special_jump(self, callee: Def, arg: Def, loc: Loc | None) -> bool:
        if isinstance(callee, Axiom) and c_name(callee) is not None:
            emit_call(self, callee, arg, loc)  # a C function (verimim.runtime.c_host)
            return True
        if isinstance(callee, App) and isinstance(callee.head, Axiom) and callee.head.annex == "gpu.launch":
            self._launch(callee, arg, loc)
            return True
        return False

    def _val(self, d: Def) -> Any:
        if isinstance(d, Axiom) and d.annex == "gpu.default_stream":
            return self.ir.Constant(self.hctx.i64, 0)
        return super()._val(d)

    def _emit_op(self, d: Def) -> Any:
        if isinstance(d, App) and isinstance(d.head, Axiom):
            annex = d.head.annex
            if annex.startswith("gpu.") or annex in ("mem.malloc", "mem.free", "mem.alloc"):
                return self._host_op(annex, d.args(), d)
            if annex in ("mem.load", "mem.store"):
                p = self._val(d.args()[1])[1]
                if isinstance(p, P) and p.space != 0:
                    raise unsupported(f"`{annex}` of address space {p.space} in host code", d.loc)
        return super()._emit_op(d)

    # ------------------------------------------------------------------ host operations

    def _size(self, t: Def, loc: Loc | None) -> int:
        lay = layout_of(t, NVPTX64)
        if lay is None:
            raise unsupported(f"the size of `{show_short(t)}`", loc)
        return lay.size

    def _record(self, nbytes: int) -> Any:
        return self._call("malloc", self._i64(nbytes))

    def _call(self, name: str, *args: Any) -> Any:
        return self.builder.call(self.hctx.runtime(name), list(args))

    def _i64(self, v: int) -> Any:
        return self.ir.Constant(self.hctx.i64, v)

    def _dev_int(self, p: Any) -> Any:
        return self.builder.ptrtoint(p.v if isinstance(p, P) else p, self.hctx.i64)

    def _host_op(self, annex: str, args: list[Def], d: App) -> Any:
        loc, b = d.loc, self.builder
        op = annex.split(".", 1)[1]
        if op in ("init", "auto_init"):
            self._call("verimim_rt_init")
            return (None, None, None)
        if op in ("deinit", "auto_deinit"):
            self._call("verimim_rt_deinit")
            return None
        if annex in ("mem.malloc", "mem.alloc"):
            t, a = self._implicit(args[0], 2, loc)
            if literal_of(a, "an address space", loc) != 0:
                raise unsupported(f"`{annex}` in address space {show_short(a)} in host code", loc)
            size = self._val(args[1])[1] if annex == "mem.malloc" else self._i64(self._size(t, loc))
            return (None, P(self._call("malloc", size), 16, 0))
        if annex == "mem.free":
            p = self._val(args[1])[1]
            self._call("free", p.v)
            return None
        if op.startswith("alloc."):
            size = self._size(args[0], loc)
            rest = self._val(args[1])
            stream = rest[1] if op == "alloc.asyn" else self._i64(BLOCKING)
            dptr = self._call("verimim_rt_dalloc", self._i64(size), stream)
            return (None, P(b.inttoptr(dptr, self.hctx.ptr), 256, 1))
        if op.startswith("free."):
            rest = self._val(args[1])
            stream = rest[2] if op == "free.asyn" else self._i64(BLOCKING)
            self._call("verimim_rt_dfree", self._dev_int(rest[1]), stream)
            return None
        if op.startswith("copy_to_device.") or op.startswith("copy_to_host."):
            size = self._i64(self._size(args[0], loc))
            rest = self._val(args[1])
            stream = rest[4] if op.endswith(".asyn") else self._i64(BLOCKING)
            src, dst = rest[2], rest[3]
            if op.startswith("copy_to_device."):
                self._call("verimim_rt_htod", self._dev_int(dst), src.v, size, stream)
            else:
                self._call("verimim_rt_dtoh", dst.v, self._dev_int(src), size, stream)
            return (None, None)
        if op == "stream_init":
            self._call("verimim_rt_stream_init", self._val(args[0])[2].v)
            return (None, None)
        if op in ("stream_deinit", "stream_sync"):
            self._call(f"verimim_rt_{op}", self._val(args[0])[2])
            return (None, None)
        raise unsupported(f"`{annex}` on the host", loc)

    def _launch(self, callee: App, arg: Def, loc: Loc | None) -> None:
        """`gpu.launch @… (groups, items, stream, m, MT) kernel args (mems, k)`: marshal the
        kernel's parameters into a `void*[]`, call the runtime, continue at k."""
        if callee.depth != 4:
            raise unsupported(f"`gpu.launch` applied to {callee.depth} of its 4 arguments", loc)
        _implicit, config, kernel, kargs = callee.args()
        if not isinstance(kernel, MutLam) or not kernel.name:
            raise unsupported(f"launching `{show_short(kernel)}`, not a kernel by name", loc)
        info = self.kernel_infos.get(kernel.name)
        if info is None:
            # no device World at all: the program's own pipeline (`_compile`) left the split out
            why = "" if self.kernel_infos else (" (there is none: the program's pipeline does not run "
                                                "`gpu.split_apply`, which the code generators need)")
            raise unsupported(f"launching `{kernel.name}`, which is not a kernel of the device World{why}", loc)
        for node in (config, kargs, arg):
            self._compute(node)
        groups, items, stream, dyn_flag, mt = self._config(config, loc)
        kv = self._val(kargs)
        ctx, ir, b = self.hctx, self.ir, self.builder
        arr_t = ir.ArrayType(ctx.ptr, max(len(info.params), 1))
        arr = self._entry_alloca(arr_t)
        for j, p in enumerate(info.params):
            v = kv
            for i in p.path:
                v = v[i]
            if p.kind == "ptr":
                val, ty = (v.v if isinstance(v, P) else v), ctx.ptr
            elif p.kind == "int" and p.bits == 1:
                val, ty = b.zext(v, ctx.i8), ctx.i8
            else:
                val, ty = v, v.type
            slot = self._entry_alloca(ty)
            b.store(val, slot)
            b.store(slot, b.gep(arr, [ir.Constant(ctx.i32, 0), ir.Constant(ctx.i32, j)], source_etype=arr_t))
        shared = self._shared_bytes(dyn_flag, mt, loc)
        if kernel.name not in self.kernel_ids:
            self.kernel_ids.append(kernel.name)
        kid = self.kernel_ids.index(kernel.name)
        ptrs = [self._launch_slot_value(kv, p) for p in info.params if p.kind == "ptr"]
        self._emit_launch(kid, self._wide(groups), self._wide(items), shared, stream, arr, ptrs)
        av = self._val(arg)
        if not (isinstance(av, tuple) and len(av) == 2):
            raise unsupported("a launch not followed by its return continuation", loc)
        self._goto(av[1], av[0], loc)

    @staticmethod
    def _launch_slot_value(kv: Any, p: Any) -> Any:
        v = kv
        for i in p.path:
            v = v[i]
        return v.v if isinstance(v, P) else v

    def _emit_launch(self, kid: int, groups: Any, items: Any, shared: int, stream: Any, params: Any,
                     ptrs: list[Any]) -> None:
        """`cuLaunchKernel` called from compiled code: the CUfunction comes from the runtime once
        per launch site and alignment (kept in a module global), so a launch in a loop costs one
        driver call; empty launches do nothing, a bad configuration or a failed launch goes to the
        runtime, which reports it when `main` returns."""
        ctx, ir, b = self.hctx, self.ir, self.builder
        i32, i64, ptr = ctx.i32, ctx.i64, ctx.ptr
        fn = self.fn
        done, check, go, get, call, bad, fail = (fn.append_basic_block(f"launch{kid}.{n}") for n in
                                                 ("done", "check", "go", "get", "call", "bad", "fail"))
        empty = b.or_(b.icmp_unsigned("==", groups, self._i64(0)), b.icmp_unsigned("==", items, self._i64(0)))
        b.cbranch(empty, done, check)
        b.position_at_end(check)
        too_big = b.or_(b.icmp_unsigned(">", items, self._i64(1024)), b.icmp_unsigned(">=", groups, self._i64(2**31)))
        b.cbranch(too_big, bad, go)
        b.position_at_end(bad)
        self._call("verimim_rt_launch_failed", self._i64(kid), groups, items, self._i64(-1))
        b.branch(done)
        b.position_at_end(go)
        acc: Any = self._i64(0)
        for pv in ptrs:
            acc = b.or_(acc, b.ptrtoint(pv, i64))
        aligned = b.icmp_unsigned("==", b.and_(acc, self._i64(15)), self._i64(0))
        cache_t = ir.ArrayType(ptr, 2)
        cache = ir.GlobalVariable(ctx.module, cache_t, f"verimim.kfn.{len(ctx.module.global_values)}")
        cache.initializer = ir.Constant(cache_t, None)
        cache.linkage = "internal"
        cache.type = ptr  # an opaque pointer (llvmlite types it)
        where = b.gep(cache, [ir.Constant(i32, 0), b.select(aligned, ir.Constant(i32, 0), ir.Constant(i32, 1))],
                      source_etype=cache_t)
        cached = b.load(where, typ=ptr)
        b.cbranch(b.icmp_unsigned("==", cached, ir.Constant(ptr, None)), get, call)
        b.position_at_end(get)
        fetched = self._call("verimim_rt_function", self._i64(kid), b.select(aligned, self._i64(16), self._i64(1)),
                             self._i64(shared))
        b.store(fetched, where)
        b.branch(call)
        b.position_at_end(call)
        f = b.phi(ptr)
        f.add_incoming(cached, go)
        f.add_incoming(fetched, get)
        if isinstance(stream, ir.Constant) and stream.constant == 0:
            s: Any = ir.Constant(ptr, None)  # the default stream
        else:
            s = self._call("verimim_rt_stream_handle", stream)
        one = ir.Constant(i32, 1)
        rc = self._call("cuLaunchKernel", f, b.trunc(groups, i32), one, one, b.trunc(items, i32), one, one,
                        ir.Constant(i32, shared), s, params, ir.Constant(ptr, None))
        b.cbranch(b.icmp_unsigned("!=", rc, ir.Constant(i32, 0)), fail, done)
        b.position_at_end(fail)
        self._call("verimim_rt_launch_failed", self._i64(kid), groups, items, b.zext(rc, i64))
        b.branch(done)
        b.position_at_end(done)

    def _config(self, config: Def, loc: Loc | None) -> tuple[Any, Any, Any, Def, Def]:
        if not isinstance(config, Tuple) or len(config.ops) != 5:
            raise unsupported(f"the launch configuration `{show_short(config)}`", loc)
        g, i, s, flag, mt = config.ops
        return self._val(g), self._val(i), self._val(s), flag, mt

    def _shared_bytes(self, flag: Def, mt: Def, loc: Loc | None) -> int:
        if not isinstance(flag, Lit):
            raise unsupported("a launch whose dynamic-shared-memory flag is not a literal", loc)
        if not flag.value:
            return 0
        t = self.w.sigma(mt.ops) if isinstance(mt, Tuple) else mt
        return self._size(t, loc)

    def _entry_alloca(self, ty: Any) -> Any:
        entry = self.fn.entry_basic_block
        ab = self.ir.IRBuilder(entry)
        ab.position_at_start(entry)
        slot = ab.alloca(ty)
        slot.type = self.ir.PointerType()  # an opaque pointer (llvmlite types it)
        return slot


# ----------------------------------------------------------------------------- driver


def emit_host(host_world: World, kernels: dict[str, KernelInfo]) -> HostModule:
    """The LLVM IR of the host World's `main` (kernels launched by their index in the result)."""
    main = find_main(host_world)

    def attempt(dynamic: set[int]) -> HostModule:
        # (a recursion: compiled again with its continuations known at run time, cps_dyn)
        ctx = _HostCtx(host_world)
        comp = _HostCompiler(ctx, main, kernels)
        comp.dyn_muts = dynamic
        comp.compile_main()
        return HostModule(str(ctx.module), comp.kernel_ids)

    return compile_until_static(attempt)


def verify_ir(text: str) -> Any:
    llvm = llvm_binding()
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as e:
        raise VerimimError("E-INTERNAL", f"the host backend produced invalid LLVM IR: {e}", None) from None
    return mod
