"""Host World → LLVM IR for the host CPU, JIT-compiled with llvmlite.

`main` becomes `i32 @verimim_main(i32 argc, ptr argv)`; memory tokens are erased, host memory is
real (`mem.malloc`/`mem.free` are libc's, slots are `alloca`s), and every `gpu.*` operation is a
call of a small C-ABI runtime (`verimim_rt_*`, see verimim.runtime.hostrt) that drives the
device through cuda-python. Kernels are launched by index into the device module compiled by
verimim.runtime.nvptx; their arguments are marshalled in host code exactly as the kernel's
parameter list (`KernelInfo.params`) says.

Control flow is compiled like the device side (verimim.runtime.nvptx): a continuation is a basic
block whose scalar parameters are φ-nodes. The host adds what kernels never need: calls of
functions and closures. Every mutable is *instantiated* per (activation of its creator,
continuation-typed arguments): the continuation-typed (static) arguments of a jump select — or
create — the block, and only the scalar leaves flow through φs. So a call `f (x, k)` of a `fun`
is a jump to f's block for the static argument `k`, and f's `return (…)` jumps to k's block: the
function is inlined per distinct return continuation. A tail call passing the same return
continuation reaches the same block again — a loop. A `lam` (a function returning a value) is
inlined where it is applied. Genuine (non-tail) recursion would need infinitely many instances
and is `E-UNSUPPORTED` beyond a bound, as is any construct the host backend does not know.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import Loc, VerimimError
from verimim.ir.analysis import postorder
from verimim.ir.defs import App, Axiom, Def, Extract, Lit, MutLam, Pack, Pi, Sigma, Tuple, Var
from verimim.ir.world import World
from verimim.layout import NVPTX64, layout_of
from verimim.runtime.nvptx import (
    P, RET, KernelInfo, Ret, _AXIOMS, _Ctx, _KernelCompiler, _Scope, _lit, _llvm, _show, unsupported,
)

ENTRY = "verimim_main"
MAX_INSTANCES = 64  # blocks per mutable: beyond this, the program recurses (not a loop)

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
    # kernel index, groups, items, dynamic shared bytes, stream, `void *params[]`
    "verimim_rt_launch": ("void", ("i64", "i64", "i64", "i64", "i64", "ptr")),
    "malloc": ("ptr", ("i64",)),
    "free": ("void", ("ptr",)),
}

BLOCKING = -1  # the stream argument of a `.block` operation

# runtime operand positions (in `app.args()`) of the host operations, as nvptx._AXIOMS
_HOST_AXIOMS: dict[str, tuple[int, tuple[int, ...]]] = dict(_AXIOMS)
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


class _HScope(_Scope):
    """The values of one block instance: `owner`'s parameter and what its body computes."""

    def __init__(self, parent: _Scope | None, owner: MutLam | None) -> None:
        super().__init__(parent)
        self.owner = owner


@dataclass(frozen=True, eq=False)
class Clo:
    """A closure known at compile time: a mutable and the activation of its creator."""

    mut: MutLam
    scope: _Scope


def _static_key(v: Any) -> Any:
    if isinstance(v, Clo):
        return (v.mut.gid, id(v.scope))
    if isinstance(v, Ret):
        return "ret"
    return v


class _HostCtx(_Ctx):
    """Module-wide state for the host module: every pointer is a plain `ptr`."""

    def __init__(self, world: World) -> None:
        super().__init__(world, param_align=1)
        llvm = _llvm()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.module.name = "verimim_host"
        self.module.triple = llvm.get_process_triple()
        tm = llvm.Target.from_default_triple().create_target_machine()
        self.module.data_layout = str(tm.target_data)
        self.ptr = self.ir.PointerType()

    def llty(self, kind: tuple[str, int, int]) -> Any:
        if kind[0] == "ptr":
            return self.ptr
        return super().llty(kind)

    def scalar(self, t: Def) -> tuple[str, int, int] | None:
        if isinstance(t, Pi):
            return ("cont", 0, 0)
        return super().scalar(t)

    def runtime(self, name: str) -> Any:
        ret, params = RUNTIME[name]
        tys = {"void": self.ir.VoidType(), "i64": self.i64, "i32": self.i32, "ptr": self.ptr}
        return self.intrinsic(name, tys[ret], [tys[p] for p in params])


class _HostCompiler(_KernelCompiler):
    """Compiles `main` and everything it reaches into one LLVM function (see the module doc)."""

    def __init__(self, ctx: _HostCtx, main: MutLam, kernels: dict[str, KernelInfo]) -> None:
        super().__init__(ctx, main, ENTRY)
        self.hctx = ctx
        self.kernel_infos = kernels
        self.kernel_ids: list[str] = []
        self.instances: dict[tuple[Any, ...], tuple[Any, list[Any]]] = {}  # key → (block, φs)
        self.count: dict[int, int] = {}
        self.work: list[tuple[MutLam, _HScope, Any]] = []
        self.scope: _Scope = _HScope(None, None)

    # ------------------------------------------------------------------ entry

    def compile_main(self) -> None:
        ctx, ir, main, w = self.hctx, self.ir, self.kernel, self.w
        if main.body is None:
            raise unsupported("`main` without a body", main.loc)
        dom = main.pi.dom
        if not isinstance(dom, Sigma) or len(dom.ops) != 2:
            raise unsupported(f"`main` of type `{_show(main.pi)}`", main.loc)
        arg_t = w.shift(dom.ops[0], -1)
        fn = ir.Function(ctx.module, ir.FunctionType(ctx.i32, [ctx.i32, ctx.ptr]), ENTRY)
        self.fn = fn
        entry = fn.append_basic_block("entry")
        self.entry_builder = ir.IRBuilder(entry)
        argc, argv = fn.args
        if isinstance(arg_t, Sigma) and len(arg_t.ops) == 3:
            arg_v: Any = (None, argc, P(argv, 8, 0))
        else:
            arg_v = None
        root = _HScope(None, None)
        scope = _HScope(root, main)
        scope.vals[w.var(main).gid] = (arg_v, RET)
        body_bb = fn.append_basic_block("main")
        self.builder = ir.IRBuilder(body_bb)
        self._compile_body(main, scope)
        while self.work:
            m, sc, bb = self.work.pop()
            self.builder = ir.IRBuilder(bb)
            self._compile_body(m, sc)
        self.entry_builder.position_at_end(entry)
        self.entry_builder.branch(body_bb)

    # ------------------------------------------------------------------ instances

    def _instance_scope(self, m: MutLam) -> _Scope:
        """The activation of m's creator that the current code sits in (the root when m
        captures nothing)."""
        creator = self.scopes.creator(m)
        s: _Scope | None = self.scope
        while s is not None:
            if isinstance(s, _HScope) and creator is not None and s.owner is creator:
                return s
            if s.parent is None:
                if creator is None:
                    return s
                break
            s = s.parent
        raise unsupported(f"`{m.name}` used outside the function whose parameters it captures", m.loc)

    def _split(self, t: Def, v: Any, dyn: list[Any], static: list[Any], loc: Loc | None) -> None:
        """The scalar (φ) and continuation-typed (static) leaves of a value of type t."""
        sc = self.hctx.scalar(t)
        if sc is not None:
            if sc[0] == "mem":
                return
            if sc[0] == "cont":
                if not isinstance(v, (Clo, Ret)):
                    raise unsupported(f"a continuation-typed value {v!r} that is not known at compile time", loc)
                static.append(v)
                return
            dyn.append(v.v if isinstance(v, P) else v)
            return
        fts = self.hctx.field_types(t)
        if not isinstance(v, tuple) or len(v) != len(fts):
            raise unsupported(f"a value of the wrong shape for `{_show(t)}`", loc)
        for f, x in zip(fts, v):
            self._split(f, x, dyn, static, loc)

    def _rebuild(self, t: Def, dyn: Any, static: Any) -> Any:
        sc = self.hctx.scalar(t)
        if sc is not None:
            if sc[0] == "mem":
                return None
            if sc[0] == "cont":
                return next(static)
            v = next(dyn)
            return P(v, sc[2], sc[1]) if sc[0] == "ptr" else v
        return tuple(self._rebuild(f, dyn, static) for f in self.hctx.field_types(t))

    def _jump(self, clo: Clo, av: Any, loc: Loc | None) -> Any:
        """The block of clo's instance for the static leaves of av; adds av's φ incoming."""
        m = clo.mut
        if m.body is None:
            raise unsupported(f"a call of `{m.name}`, which has no body", loc)
        outer, self.scope = self.scope, clo.scope
        dom = self._resolve(m.pi.dom)  # in the creator's activation: its parameters are known there
        self.scope = outer
        dyn: list[Any] = []
        static: list[Any] = []
        self._split(dom, av, dyn, static, loc)
        key = (m.gid, id(clo.scope), tuple(_static_key(s) for s in static))
        inst = self.instances.get(key)
        if inst is None:
            n = self.count[m.gid] = self.count.get(m.gid, 0) + 1
            if n > MAX_INSTANCES:
                raise unsupported(f"the recursion of `{m.name}` (only tail calls that pass the same "
                                  f"continuation, i.e. loops, are compiled)", m.loc)
            bb = self.fn.append_basic_block(f"{m.name or 'cont'}.{n}")
            b = self.ir.IRBuilder(bb)
            phis = [b.phi(x.type, name=f"{m.name}.p{i}") for i, x in enumerate(dyn)]
            sc = _HScope(clo.scope, m)
            sc.vals[self.w.var(m).gid] = self._rebuild(dom, iter(phis), iter(static))
            inst = self.instances[key] = (bb, phis)
            self.work.append((m, sc, bb))
        bb, phis = inst
        for ph, v in zip(phis, dyn):
            if v.type != ph.type:
                raise unsupported(f"a jump to `{m.name}` passing {v.type} for {ph.type}", loc)
            ph.add_incoming(v, self.builder.block)
        return bb

    # ------------------------------------------------------------------ bodies

    def _compile_body(self, m: MutLam, scope: _Scope) -> None:
        body = m.body
        assert body is not None
        if not isinstance(body, App):
            raise unsupported(f"the body of `{m.name}`, which does not end in a jump", m.loc)
        self.scope = scope
        callee, arg = body.callee, body.arg
        if isinstance(callee, Extract) and not isinstance(callee.index, Lit):
            self._compute(callee.tup)
            self._compute(callee.index)
            self._compute(arg)
            self._branch(self._val(callee.tup), self._val(callee.index), self._val(arg), body.loc)
            return
        if isinstance(callee, App) and isinstance(callee.head, Axiom) and callee.head.annex == "gpu.launch":
            self._launch(callee, arg, body.loc)
            return
        self._compute(callee)
        self._compute(arg)
        self._goto(self._val(callee), self._val(arg), body.loc)

    def _goto(self, cv: Any, av: Any, loc: Loc | None) -> None:
        if isinstance(cv, Ret):
            self._return(av, loc)
            return
        if isinstance(cv, Clo):
            bb = self._jump(cv, av, loc)
            self.builder.branch(bb)
            return
        raise unsupported(f"a jump to {cv!r}", loc)

    def _return(self, av: Any, loc: Loc | None) -> None:
        if not (isinstance(av, tuple) and len(av) == 2) or getattr(av[1], "type", None) != self.hctx.i32:
            raise unsupported("a return from `main` without an I32 result", loc)
        self.builder.ret(av[1])

    def _branch(self, targets: Any, iv: Any, av: Any, loc: Loc | None) -> None:
        if not isinstance(targets, tuple) or not all(isinstance(x, Clo) for x in targets):
            raise unsupported("a branch to something other than continuations", loc)
        src = self.builder
        blocks = [self._jump(x, av, loc) for x in targets]
        self.builder = src
        if len(blocks) == 2:
            src.cbranch(self._as_i1(iv, loc), blocks[1], blocks[0])
            return
        sw = src.switch(iv, blocks[0])
        for j, bb in enumerate(blocks[1:], 1):
            sw.add_case(self.ir.Constant(iv.type, j), bb)

    # ------------------------------------------------------------------ values

    def _operands(self, d: Def) -> list[Def]:
        if isinstance(d, App) and not isinstance(d.head, Axiom) and not self._is_leaf(d):
            return [d.callee, d.arg]
        if isinstance(d, App) and isinstance(d.head, Axiom):
            spec = _HOST_AXIOMS.get(d.head.annex)
            if spec is None:
                raise unsupported(f"`{d.head.annex}` on the host", d.loc)
            arity, pos = spec
            if d.depth != arity:
                raise unsupported(f"`{d.head.annex}` applied to {d.depth} of its {arity} arguments", d.loc)
            args = d.args()
            return [args[i] for i in pos]
        return super()._operands(d)

    def _val(self, d: Def) -> Any:
        if isinstance(d, MutLam):
            return Clo(d, self._instance_scope(d))
        if isinstance(d, Axiom) and d.annex == "gpu.default_stream":
            return self.ir.Constant(self.hctx.i64, 0)
        if isinstance(d, Lit) and self.scopes.deps(d):
            return self.ir.Constant(self.ir.IntType(self._int_leaf(self._resolve(d.ops[0]), d.loc)), d.value)
        return super()._val(d)

    def _int_leaf(self, t: Def, loc: Loc | None) -> int:
        sc = self.hctx.scalar(t)
        if sc is None or sc[0] != "int":
            raise unsupported(f"the literal of type `{_show(t)}`", loc)
        return sc[1]

    # ------------------------------------------------------------------ specialisation

    def _resolve(self, d: Def) -> Def:
        """d with every parameter projection whose value is a compile-time integer replaced by
        that literal, so types like `Idx n` or `«n; Stream»` of an inlined `fun with_streams
        (n, …)` become concrete (the World normalizes what then folds, e.g. `core.trait.size`)."""
        if not self.scopes.deps(d):
            return d
        memo: dict[int, Def] = {}
        w = self.w
        for x in postorder(d, lambda y: y.gid in memo or not self.scopes.deps(y),
                           lambda y: () if isinstance(y, MutLam) else y.ops):
            lit = self._known_int(x)
            if lit is not None:
                memo[x.gid] = lit
                continue
            if isinstance(x, (Var, MutLam)):
                memo[x.gid] = x
                continue
            ops = tuple(memo.get(op.gid, op) for op in x.ops)
            memo[x.gid] = x if all(a is b for a, b in zip(ops, x.ops)) else x.rebuild(w, ops)
        return memo.get(d.gid, d)

    def _known_int(self, x: Def) -> Def | None:
        path: list[int] = []
        root = x
        while isinstance(root, Extract) and isinstance(root.index, Lit):
            path.append(root.index.value)
            root = root.tup
        if not isinstance(root, Var):
            return None
        try:
            v = self.scope.get(root.gid)
        except KeyError:
            return None
        for i in reversed(path):
            if not isinstance(v, tuple) or i >= len(v):
                return None
            v = v[i]
        if not isinstance(v, self.ir.Constant) or not isinstance(v.type, self.ir.IntType):
            return None
        t = self._resolve(self.w.type_of(x))
        return self.w.lit(t, int(v.constant))

    def _specialised(self, d: Def) -> Def:
        """An operation whose static operands (types, widths, shapes) use parameters: the same
        operation with those resolved (its run-time operands are the same nodes)."""
        w = self.w
        if isinstance(d, App) and isinstance(d.head, Axiom):
            spec = _HOST_AXIOMS.get(d.head.annex)
            pos = spec[1] if spec is not None else ()
            args = d.args()
            new = [a if i in pos else self._resolve(a) for i, a in enumerate(args)]
            if all(a is b for a, b in zip(new, args)):
                return d
            res = d.head
            for a in new:
                res = w.app(res, a)
            return res
        if isinstance(d, Pack):
            shape = self._resolve(d.shape)
            return d if shape is d.shape else w.pack(shape, d.body)
        return d

    def _emit(self, d: Def) -> Any:
        if self.scopes.deps(d) and isinstance(d, (App, Pack)):
            d2 = self._specialised(d)
            if d2 is not d:
                self._compute(d2)
                return self._val(d2)
        if isinstance(d, App) and not isinstance(d.head, Axiom):
            return self._apply(d)
        if isinstance(d, App) and isinstance(d.head, Axiom):
            annex = d.head.annex
            if annex.startswith("gpu.") or annex in ("mem.malloc", "mem.free", "mem.alloc"):
                return self._host_op(annex, d.args(), d)
            if annex in ("mem.load", "mem.store"):
                p = self._val(d.args()[1])[1]
                if isinstance(p, P) and p.space != 0:
                    raise unsupported(f"`{annex}` of address space {p.space} in host code", d.loc)
        return super()._emit(d)

    def _apply(self, d: App) -> Any:
        """A `lam` applied for its value: inlined here."""
        cv = self._val(d.callee)
        if not isinstance(cv, Clo) or cv.mut.body is None or self.w.is_cn(cv.mut.pi):
            raise unsupported(f"the call `{_show(d)}` for a value", d.loc)
        m = cv.mut
        n = self.count[m.gid] = self.count.get(m.gid, 0) + 1
        if n > MAX_INSTANCES * 4:
            raise unsupported(f"the recursion of `{m.name}`", m.loc)
        outer = self.scope
        sc = _HScope(cv.scope, m)
        sc.vals[self.w.var(m).gid] = self._val(d.arg)
        self.scope = sc
        try:
            self._compute(m.body)  # type: ignore[arg-type]
            return self._val(m.body)  # type: ignore[arg-type]
        finally:
            self.scope = outer

    # ------------------------------------------------------------------ host operations

    def _size(self, t: Def, loc: Loc | None) -> int:
        lay = layout_of(t, NVPTX64)
        if lay is None:
            raise unsupported(f"the size of `{_show(t)}`", loc)
        return lay.size

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
            if _lit(a, "an address space", loc) != 0:
                raise unsupported(f"`{annex}` in address space {_show(a)} in host code", loc)
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
            raise unsupported(f"launching `{_show(kernel)}`, not a kernel by name", loc)
        info = self.kernel_infos.get(kernel.name)
        if info is None:
            raise unsupported(f"launching `{kernel.name}`, which is not a kernel of the device World", loc)
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
        self._call("verimim_rt_launch", self._i64(kid), self._wide(groups), self._wide(items),
                   self._i64(shared), stream, arr)
        av = self._val(arg)
        if not (isinstance(av, tuple) and len(av) == 2):
            raise unsupported("a launch not followed by its return continuation", loc)
        self._goto(av[1], av[0], loc)

    def _config(self, config: Def, loc: Loc | None) -> tuple[Any, Any, Any, Def, Def]:
        if not isinstance(config, Tuple) or len(config.ops) != 5:
            raise unsupported(f"the launch configuration `{_show(config)}`", loc)
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
    main = host_world.externals.get("main")
    if main is None:
        raise VerimimError("E-NAME", "the program has no `fun extern main`", None)
    ctx = _HostCtx(host_world)
    comp = _HostCompiler(ctx, main, kernels)
    comp.compile_main()
    return HostModule(str(ctx.module), comp.kernel_ids)


def verify_ir(text: str) -> Any:
    llvm = _llvm()
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as e:
        raise VerimimError("E-INTERNAL", f"the host backend produced invalid LLVM IR: {e}", None) from None
    return mod
