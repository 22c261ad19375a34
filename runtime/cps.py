"""Continuation graphs → LLVM basic blocks, shared by the device (kernels) and host backends.

Every mutable is *instantiated* per (activation of its creator, continuation-typed arguments):
the continuation-typed (static) leaves of a jump's argument select — or create — the block, and
only the scalar leaves flow through φ-nodes. So a call `f (x, k)` of a `fun` is a jump to f's
block for the static argument `k`, and f's `return (…)` jumps to k's block: a function is inlined
per distinct return continuation; a tail call that passes the same continuation reaches the same
block again — a loop. A `lam` (a function returning a value) is inlined where it is applied.
Genuine (non-tail) recursion would need unboundedly many instances and is `E-UNSUPPORTED`
beyond MAX_INSTANCES, naming the function.

Parameters of an instance whose values are compile-time integers specialise what uses them:
`Idx n`, `«n; T»`, `core.trait.size «n; Stream»` inside an inlined `fun with_streams (n, …)`
become concrete (`_resolve`), so the operations that need literal widths and shapes compile.

Scheduling within a block and the `core`/`mem` operations are verimim.runtime.nvptx's
(`BodyCompiler`); the kernel entry (`KernelCompiler`) is here, the host entry and the `gpu.*`
host operations are in verimim.runtime.host.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from verimim.diagnostics import Loc
from verimim.ir.analysis import scan_mut
from verimim.ir.defs import App, Axiom, Def, Extract, IdxT, Lam, Lit, MutLam, Pack, Sigma, Var
from verimim.ir.schedule import jump_roots, postorder
from verimim.plug.c_lib import c_name
from verimim.runtime.cps_dyn import DynamicClosures, DynClo, NeedDynamic
from verimim.runtime.lowering import (
    P, RET, BodyCompiler, KernelInfo, ModuleContext, ParamInfo, Ret, Scope, show_short, unsupported,
)

if TYPE_CHECKING:
    import llvmlite.ir

MAX_INSTANCES = 64  # blocks per mutable: beyond this, the program recurses (not a loop)


class _HScope(Scope):
    """The values of one block instance: `owner`'s parameter and what its body computes."""

    def __init__(self, parent: Scope | None, owner: MutLam | None) -> None:
        super().__init__(parent)
        self.owner = owner


@dataclass(frozen=True, eq=False)
class Clo:
    """A closure known at compile time: a mutable and the activation of its creator."""

    mut: MutLam
    scope: Scope


def _static_key(v: Any) -> Any:
    # A closure is keyed by its activation object itself, never by `id()`: an activation whose
    # instance is compiled may be freed, and a later one at the same address would then reach
    # that instance with the other activation's values (a curried `join c` applied in two
    # branches got one branch's `c` on the GPU). The key keeps the activation alive.
    if isinstance(v, Clo):
        return (v.mut.gid, v.scope)
    if isinstance(v, Ret):
        return "ret"
    return v


class CpsCompiler(BodyCompiler, DynamicClosures):
    """Compiles the continuation graph below one root function into one LLVM function."""

    # Whether continuations may become known only at run time (verimim.runtime.cps_dyn): a
    # recursion then raises NeedDynamic for the caller to compile again, instead of E-UNSUPPORTED.
    dynamic_closures = False

    def __init__(self, ctx: ModuleContext, root: MutLam, name: str,
                 axioms: dict[str, tuple[int, tuple[int, ...]]] | None = None) -> None:
        super().__init__(ctx, root, name)
        if axioms is not None:
            self.axioms = axioms
        self.instances: dict[tuple[Any, ...], tuple[Any, list[Any]]] = {}  # key → (block, φs)
        self.count: dict[int, int] = {}
        self.work: list[tuple[MutLam, _HScope, Any]] = []
        self.scope: Scope = _HScope(None, None)
        self.root_scope: Scope = self.scope
        # Type arguments of inlined `lam`s (`seq {A: *} …` at «2; Nat»), by parameter: a type used
        # only in types is captured by no closure, so no scope chain holds it. None: applied at
        # two types (then nothing is resolved from it).
        self.type_args: dict[int, Def | None] = {}
        self.dyn_muts: set[int] = set()  # mutables whose continuations come from records
        self._loops: dict[int, bool] = {}  # continuation gid → whether a loop may run it again (_in_a_loop)
        self._dyn_setup()

    def run_body(self, root_val: Any, body_bb: Any) -> None:
        """Compile the root's body (its parameter bound to root_val) and every block it reaches."""
        root = self.root_scope = _HScope(None, None)
        scope = _HScope(root, self.kernel)
        scope.vals[self.w.var(self.kernel).gid] = root_val
        self.builder = self.ir.IRBuilder(body_bb)
        self._compile_body(self.kernel, scope)
        while self.work:
            m, sc, bb = self.work.pop()
            self.builder = self.ir.IRBuilder(bb)
            self._compile_body(m, sc)
        self._connect()

    # ------------------------------------------------------------------ instances

    def _instance_scope(self, m: MutLam) -> Scope:
        """The activation of m's creator that the current code sits in (the root when m
        captures nothing)."""
        creator = self.scopes.creator(m)
        s: Scope | None = self.scope
        while s is not None:
            if isinstance(s, _HScope) and creator is not None and s.owner is creator:
                return s
            if s.parent is None:
                if creator is None:
                    return s
                break
            s = s.parent
        raise unsupported(f"`{m.name}` used outside the function whose parameters it captures", m.loc)

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
        dynamic = m.gid in self.dyn_muts
        if dynamic:
            self._dflatten(dom, av, dyn, loc)  # continuations as record pointers
        else:
            self.ctx.flatten(dom, av, dyn, loc, static, self.fit_int)
            if any(isinstance(s, DynClo) for s in static):
                if self.dynamic_closures:
                    raise NeedDynamic(m)
                raise unsupported(f"a continuation known only at run time passed to `{m.name}`", loc)
        key = (m.gid, clo.scope, tuple(_static_key(s) for s in static))
        inst = self.instances.get(key)
        if inst is None:
            n = self.count[m.gid] = self.count.get(m.gid, 0) + 1
            if n > MAX_INSTANCES:
                if self.dynamic_closures and not dynamic:
                    raise NeedDynamic(m)
                raise unsupported(f"the recursion of `{m.name}` (only tail calls that pass the same "
                                  f"continuation, i.e. loops, are compiled)", m.loc)
            bb = self.fn.append_basic_block(f"{m.name or 'cont'}.{n}")
            b = self.ir.IRBuilder(bb)
            phis = [b.phi(x.type, name=f"{m.name}.p{i}") for i, x in enumerate(dyn)]
            sc = _HScope(clo.scope, m)
            sc.vals[self.w.var(m).gid] = (self._dbuild(dom, iter(phis)) if dynamic
                                          else self.ctx.build(dom, iter(phis), iter(static)))
            inst = self.instances[key] = (bb, phis)
            self.work.append((m, sc, bb))
        bb, phis = inst
        for ph, v in zip(phis, dyn):
            if v.type != ph.type:
                raise unsupported(f"a jump to `{m.name}` passing {v.type} for {ph.type}", loc)
            ph.add_incoming(v, self.builder.block)
        return bb

    # ------------------------------------------------------------------ bodies

    def _compile_body(self, m: MutLam, scope: Scope) -> None:
        body = m.body
        assert body is not None
        if not isinstance(body, App):
            raise unsupported(f"the body of `{m.name}`, which does not end in a jump", m.loc)
        self.scope = scope
        # what two or more of the continuations this activation makes use: computed here, once
        # (verimim.ir.schedule.Scopes.shared_needs, as the interpreter does)
        self._compute(self.scopes.shared_needs(m, self._is_leaf))
        callee, arg = body.callee, body.arg
        if isinstance(callee, Extract) and not isinstance(callee.index, Lit):
            # a branch: the selected continuation is a switch, not a value (else jump_roots' order)
            self._compute([callee.tup, callee.index, arg])
            self._branch(self._val(callee.tup), self._val(callee.index), self._val(arg), body.loc)
            return
        if self._special_jump(callee, arg, body.loc):
            return
        self._compute(jump_roots(body))
        self._goto(self._val(callee), self._val(arg), body.loc)

    def _slot_memory(self, size: int, align: int) -> Any:
        """Inside a mutable that takes its continuations at run time (a genuine recursion,
        verimim.runtime.cps_dyn) one compiled instance serves every activation, live at once: a
        slot there is a heap block of its own per execution (like the records, never freed), not
        the instance's one `alloca`."""
        s: Scope | None = self.scope
        owner: MutLam | None = None
        while s is not None:
            if isinstance(s, _HScope) and s.owner is not None and s.owner.gid in self.dyn_muts:
                return self._record(size)  # malloc aligns to 16 bytes, as the alloca asks
            if owner is None and isinstance(s, _HScope) and s.owner is not None:
                owner = s.owner
            s = s.parent
        if owner is not None and self._in_a_loop(owner):
            # A continuation a loop runs again within one activation: each run's slot is a block
            # of its own until the function returns (SEMANTICS.md), not the one `alloca` of the
            # entry block every run shared (a pointer kept from an earlier run saw a later run's
            # value). Allocated where it runs.
            mem = self.builder.alloca(self.ir.ArrayType(self.ctx.i8, size))
            mem.align = align  # pyright: ignore[reportAttributeAccessIssue]
            mem.type = self.ir.PointerType()
            return mem
        return super()._slot_memory(size, align)

    def _in_a_loop(self, m: MutLam) -> bool:
        """Whether continuation m may run again within the activation that runs it: m reaches
        itself through the mutables its body names (verimim.ir.analysis.scan_mut; a
        conservative answer: named is not always jumped to). Once per continuation."""
        hit = self._loops.get(m.gid)
        if hit is not None:
            return hit
        seen: set[int] = set()
        stack: list[MutLam] = [m]
        found = False
        while stack and not found:
            cur = stack.pop()
            for nxt in scan_mut(cur, annexes=True)[1]:
                if nxt is m:
                    found = True
                    break
                if nxt.gid not in seen:
                    seen.add(nxt.gid)
                    stack.append(nxt)
        self._loops[m.gid] = found
        return found

    def _goto(self, cv: Any, av: Any, loc: Loc | None) -> None:
        if isinstance(cv, Ret):
            self._return(av, loc)
            return
        if isinstance(cv, Clo):
            bb = self._jump(cv, av, loc)
            self.builder.branch(bb)
            return
        if isinstance(cv, DynClo):
            self._dispatch(cv, av, loc)
            return
        raise unsupported(f"a jump to {cv!r}", loc)

    def _special_jump(self, callee: Def, arg: Def, loc: Loc | None) -> bool:
        """Override: compile a jump the subclass knows (e.g. `gpu.launch … (mems, k)`)."""
        return False

    def _return(self, av: Any, loc: Loc | None) -> None:
        """Override: the root function's `return`."""
        raise NotImplementedError

    def _branch(self, targets: Any, iv: Any, av: Any, loc: Loc | None) -> None:
        if not isinstance(targets, tuple):
            raise unsupported("a branch whose targets are no tuple known at compile time", loc)
        src = self.builder
        blocks = []
        for x in targets:
            self.builder = src
            blocks.append(self._target_block(x, av, loc))
        self.builder = src
        if len(blocks) == 2:
            src.cbranch(self._as_i1(iv, loc), blocks[1], blocks[0])
            return
        sw = src.switch(iv, blocks[0])
        for j, bb in enumerate(blocks[1:], 1):
            sw.add_case(self.ir.Constant(iv.type, j), bb)

    def _target_block(self, x: Any, av: Any, loc: Loc | None) -> Any:
        """The block a branch to x goes to: a continuation's instance, or, for any other jump
        target (the function's `return`, a continuation known only at run time), a block of
        its own that jumps there with the branch's argument."""
        if isinstance(x, Clo):
            return self._jump(x, av, loc)
        bb = self.fn.append_basic_block("branch")
        self.builder = self.ir.IRBuilder(bb)
        self._goto(x, av, loc)
        return bb

    # ------------------------------------------------------------------ values

    def _operands(self, d: Def) -> list[Def]:
        if isinstance(d, App) and not isinstance(d.head, Axiom) and not self._is_leaf(d):
            return [d.callee, d.arg]  # a `lam` applied for its value: `_apply`
        return super()._operands(d)

    def _is_leaf(self, d: Def) -> bool:
        # an immutable λ is a value (a branch target, an argument): its equivalent mutable's
        # closure (`_val`), its body compiled where it is jumped to or applied
        return isinstance(d, Lam) or super()._is_leaf(d)

    def _val(self, d: Def) -> Any:
        if isinstance(d, Lam):
            d = self.w.lam_as_mut(d)
        if isinstance(d, MutLam):
            if self.scope.has(d.gid):
                return self.scope.get(d.gid)  # a closure captured by a record (cps_dyn)
            return Clo(d, self._instance_scope(d))
        if isinstance(d, Lit) and self.scopes.deps(d):
            return self.ir.Constant(self.ir.IntType(self._int_leaf(self._resolve(d.ops[0]), d.loc)), d.value)
        return super()._val(d)

    def _select_element(self, iv: Any, elems: list[Any], d: Extract) -> Any:
        chosen = self._select_continuation(iv, elems, d) if self.dynamic_closures else None
        return chosen if chosen is not None else super()._select_element(iv, elems, d)

    def _int_leaf(self, t: Def, loc: Loc | None) -> int:
        sc = self.ctx.scalar(t)
        if sc is None or sc[0] != "int":
            raise unsupported(f"the literal of type `{show_short(t)}`", loc)
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
            t = self.type_args.get(root.gid)
            return t if t is not None and not path else None
        for i in reversed(path):
            if not isinstance(v, tuple) or i >= len(v):
                return None
            v = v[i]
        if isinstance(v, Def) and not v.bvd and self.ctx.is_static(v):
            return v  # a type argument: the type itself
        c = cast("llvmlite.ir.Constant", v)  # where the test below holds (self.ir is llvmlite.ir, typed Any)
        if not isinstance(v, self.ir.Constant) or not isinstance(c.type, self.ir.IntType):
            return None
        t = self._resolve(self.w.type_of(x))
        return self.w.lit(t, int(c.constant))

    def _specialised(self, d: Def) -> Def:
        """An operation whose static operands (types, widths, shapes) use parameters: the same
        operation with those resolved (its run-time operands are the same nodes)."""
        w = self.w
        if isinstance(d, App) and isinstance(d.head, Axiom):
            spec = self.axioms.get(d.head.annex)
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
        return self._emit_op(d)

    def _emit_op(self, d: Def) -> Any:
        """Override: an operation (its static operands concrete); the default knows `core`/`mem`."""
        return super()._emit(d)

    def _apply(self, d: App) -> Any:
        """A `lam` applied for its value: inlined here."""
        cv = self._val(d.callee)
        if not isinstance(cv, Clo) or cv.mut.body is None or self.w.is_cn(cv.mut.pi):
            raise unsupported(f"the call `{show_short(d)}` for a value", d.loc)
        m = cv.mut
        n = self.count[m.gid] = self.count.get(m.gid, 0) + 1
        if n > MAX_INSTANCES * 4:
            raise unsupported(f"the recursion of `{m.name}`", m.loc)
        outer = self.scope
        sc = _HScope(cv.scope, m)
        arg = sc.vals[self.w.var(m).gid] = self._val(d.arg)
        if isinstance(arg, Def) and not arg.bvd and self.ctx.is_static(arg):
            key = self.w.var(m).gid
            self.type_args[key] = arg if self.type_args.get(key, arg) is arg else None
        self.scope = sc
        try:
            self._compute(m.body)  # type: ignore[arg-type]
            return self._val(m.body)  # type: ignore[arg-type]
        finally:
            self.scope = outer


class KernelCompiler(CpsCompiler):
    """A kernel of the device World: `Cn [M1, M3, M4, M5, Idx G, Idx I, smem, args, return]`
    becomes a `ptx_kernel` function whose parameters are the scalar leaves of `args`.

    A genuine recursion (a function passing itself a new continuation) takes its continuations
    as records on the device heap (cps_dyn; CUDA's device `malloc`, one of PTX's system calls),
    each work-item its own. A record is never freed; where the heap is exhausted (256 MiB:
    cuda.DEVICE_HEAP_BYTES) the work-item traps, which fails the launch, rather than write through null."""

    dynamic_closures = True

    def _record(self, nbytes: int) -> Any:
        ctx, ir, b = self.ctx, self.ir, self.builder
        rec = b.call(ctx.intrinsic("malloc", ctx.ptr, [ctx.i64]), [ir.Constant(ctx.i64, nbytes)])
        null = b.icmp_unsigned("==", rec, ir.Constant(ctx.ptr, None))
        with b.if_then(null, likely=False):
            b.call(ctx.intrinsic("llvm.trap", ir.VoidType(), []), [])
        return rec

    def compile(self) -> KernelInfo:
        ctx, ir, k = self.ctx, self.ir, self.kernel
        if k.body is None:
            raise unsupported(f"kernel `{self.name}` without a body", k.loc)
        dom = k.pi.dom
        if not isinstance(dom, Sigma) or len(dom.ops) != 9:
            raise unsupported(f"kernel `{self.name}` of type `{show_short(k.pi)}` (not a gpu.launch kernel)", k.loc)
        ft = [self.w.shift(f, -1) for f in dom.ops]
        G = ft[4].size.value if isinstance(ft[4], IdxT) and isinstance(ft[4].size, Lit) else None
        I = ft[5].size.value if isinstance(ft[5], IdxT) and isinstance(ft[5].size, Lit) else None
        if G is None or I is None:
            raise unsupported(f"kernel `{self.name}` whose group/item counts are not literals", k.loc)
        smem_t, args_t = ft[6], ft[7]
        arg_leaves = ctx.leaves(args_t)
        params: list[ParamInfo] = []
        lltys = []
        for path, (kind, a, _b) in arg_leaves:
            if kind == "int":
                params.append(ParamInfo(path, "int", a))
                lltys.append(ctx.i8 if a == 1 else ir.IntType(a))
            elif kind == "ptr":
                params.append(ParamInfo(path, "ptr", 64, a))
                lltys.append(ctx.llty((kind, a, 0)))
            else:
                params.append(ParamInfo(path, "stream", 64))
                lltys.append(ctx.i64)
        fn = ir.Function(ctx.module, ir.FunctionType(ir.VoidType(), lltys), self.name)
        fn.calling_convention = "ptx_kernel"
        self.fn = fn
        entry = fn.append_basic_block("entry")
        self.entry_builder = ir.IRBuilder(entry)
        b = self.entry_builder
        leaf_vals = []
        for (path, (kind, a, pal)), arg in zip(arg_leaves, fn.args):
            if kind == "ptr":
                arg.attributes.align = max(ctx.param_align, pal)
                leaf_vals.append(arg)
            elif kind == "int" and a == 1:
                leaf_vals.append(b.trunc(arg, ctx.i1))
            else:
                leaf_vals.append(arg)
        # arguments may alias one another: pointers start at the (assumed) parameter alignment
        args_v = self._with_param_align(ctx.build(args_t, iter(leaf_vals)))
        smem_v, dyn = self._smem(smem_t)
        gid = self._sreg("ctaid", G, ft[4])
        iid = self._sreg("tid", I, ft[5])
        body_bb = fn.append_basic_block("k." + (k.name or "kernel"))
        self.run_body((None, None, None, None, gid, iid, smem_v, args_v, RET), body_bb)
        self.entry_builder.position_at_end(entry)
        self.entry_builder.branch(body_bb)
        return KernelInfo(self.name, G, I, params, dyn)

    def _smem(self, smem_t: Def) -> tuple[Any, bool]:
        ctx = self.ctx
        smem_sc = ctx.scalar(smem_t)
        if smem_sc is not None and smem_sc[0] == "ptr":
            if smem_sc[1] != 3:
                raise unsupported(f"dynamic shared memory of type `{show_short(smem_t)}`", self.kernel.loc)
            return P(ctx.dyn_smem(), 16, 3), True
        if smem_sc is None and not ctx.leaves(smem_t):
            return ctx.build(smem_t, iter(())), False
        raise unsupported(f"dynamic shared memory of type `{show_short(smem_t)}`", self.kernel.loc)

    def _return(self, av: Any, loc: Loc | None) -> None:
        self.builder.ret_void()

    def _special_jump(self, callee: Def, arg: Def, loc: Loc | None) -> bool:
        name = c_name(callee)
        if name is not None:
            raise unsupported(f"a call of the C function `{name}` in a kernel (C functions run on the host)", loc)
        return False
