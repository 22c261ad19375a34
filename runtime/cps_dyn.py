"""Continuations known only at run time, for compiled host code: genuine recursion.

verimim.runtime.cps instantiates a mutable per continuation argument, known at compile time:
that compiles loops, but not a function that passes a new closure to itself on every call
(non-tail recursion, upstream's pull-back chains), which needs unboundedly many instances. For
such a mutable (`NeedDynamic`, found while compiling; the host backend then compiles again) the
continuation-typed leaves of its parameter are *dynamic*: a pointer to a heap record holding a
tag and the values the closure captures. A jump to one loads the tag and switches to the
trampoline of that tag, which loads the captures into a scope of their own and jumps into the
mutable's one instance — defunctionalization. Records are malloc'd and never freed (the
interpreter checks the program; compiled code only runs it).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from verimim.diagnostics import Loc
from verimim.ir.defs import Def, MutLam, Pi
from verimim.ir.schedule import holds_continuation
from verimim.runtime.lowering import P, Ret, show_short, unsupported

SLOT = 8  # bytes per record slot: the tag, then one per captured scalar
T = TypeVar("T")


class NeedDynamic(Exception):
    """`mut` must take its continuations at run time; compile again with it dynamic."""

    def __init__(self, mut: MutLam) -> None:
        super().__init__(mut.name)
        self.mut = mut


def compile_until_static(attempt: Callable[[set[int]], T]) -> T:
    """`attempt(dynamic)` again with each mutable it reports (NeedDynamic) added to `dynamic`, the
    mutables whose continuations come from records, until it compiles. Each round adds one
    mutable, so this ends; a mutable reported twice is a recursion records cannot compile."""
    dynamic: set[int] = set()
    while True:
        try:
            return attempt(dynamic)
        except NeedDynamic as e:
            if e.mut.gid in dynamic:
                raise unsupported(f"the recursion of `{e.mut.name}`", e.mut.loc) from None
            dynamic.add(e.mut.gid)


@dataclass(frozen=True, eq=False)
class DynClo:
    """A continuation of type `pi` known at run time: `ptr` points to its record."""

    ptr: Any
    pi: Def


@dataclass
class _Trampoline:
    tag: int
    pi: Def
    block: Any
    rec: Any          # φ: the record
    args: list[Any]   # φs: the argument's scalar leaves


class DynamicClosures:
    """Mixed into verimim.runtime.cps.CpsCompiler (whose attributes it uses)."""

    ctx: Any
    ir: Any
    w: Any
    fn: Any
    builder: Any
    scope: Any
    scopes: Any
    dyn_muts: set[int]

    def _dyn_setup(self) -> None:
        self.trampolines: dict[Any, _Trampoline] = {}
        self.dispatches: list[tuple[Def, Any, Any, Any, list[Any]]] = []
        self.captures: dict[int, list[Def]] = {}
        self._making: set[int] = set()  # mutables whose records are being filled (cycles)
        self._unreachable: Any = None

    def _record(self, nbytes: int) -> Any:
        """Override (host, device): a fresh heap record of nbytes."""
        raise unsupported("a continuation known only at run time", None)

    # ------------------------------------------------------------------ values ↔ scalar leaves

    def _closed(self, t: Def, what: str, loc: Loc | None) -> Def:
        if self.scopes.deps(t):
            raise unsupported(f"{what} of the dependent type `{show_short(t)}` known only at run time", loc)
        return t

    def _dflatten(self, t: Def, v: Any, out: list[Any], loc: Loc | None) -> None:
        """v's scalar leaves into out; a continuation leaf becomes its record's pointer."""
        sc = self.ctx.scalar(t)
        if sc is None:
            fts = self.ctx.field_types(t)
            if not isinstance(v, tuple) or len(v) != len(fts):
                raise unsupported(f"a value of the wrong shape for `{show_short(t)}`", loc)
            for f, x in zip(fts, v):
                self._dflatten(f, x, out, loc)
        elif sc[0] == "cont":
            out.append(self._materialize(v, t, loc))
        elif sc[0] != "mem":
            out.append(v.v if isinstance(v, P) else v)

    def _dbuild(self, t: Def, it: Any) -> Any:
        sc = self.ctx.scalar(t)
        if sc is None:
            return tuple(self._dbuild(f, it) for f in self.ctx.field_types(t))
        if sc[0] == "mem":
            return None
        v = next(it)
        if sc[0] == "cont":
            return DynClo(v, t)
        return P(v, sc[2], sc[1]) if sc[0] == "ptr" else v

    def _has_cont(self, t: Def) -> bool:
        sc = self.ctx.scalar(t)
        if sc is None:
            return any(self._has_cont(f) for f in self.ctx.field_types(t))
        return sc[0] == "cont"

    def _leaf_types(self, t: Def) -> list[Any]:
        sc = self.ctx.scalar(t)
        if sc is None:
            return [x for f in self.ctx.field_types(t) for x in self._leaf_types(f)]
        if sc[0] == "mem":
            return []
        # A pointer keeps its address space's type: a record holds a shared-space address as
        # itself, and a generic load of one would read elsewhere (an illegal address on the GPU).
        return [self.ctx.ptr if sc[0] == "cont" else self.ctx.llty(sc)]

    # ------------------------------------------------------------------ closures → records

    def _captured(self, m: MutLam) -> list[Def]:
        """What m's body (and the mutables nested in it) takes from outside: parameters of
        enclosing mutables, nodes computed from them, closures made outside."""
        hit = self.captures.get(m.gid)
        if hit is not None:
            return hit
        # A choice between continuations (`(finish, return)#c`) is looked into: the continuations
        # m's activation makes are made there, from what the record holds, not in m's creator.
        out = self.scopes.outside(m, lambda x: self.ctx.is_static(x) or holds_continuation(x))
        # What m's activation computes once for the continuations it makes (Scopes.shared_needs)
        # from enclosing parameters is captured whole too: the trampoline has no creator to take
        # its parts from (a shared `mem.lea (out, i)` needs `out` and `i`, which no body names).
        # A constant is computed anywhere.
        # So is what the activations of the continuations nested in m compute once for theirs:
        # built from m's record, their enclosing parameters are no values there either (a kernel's
        # `group_id` that two arms of a branch inside m use).
        local, taken = self.scopes.nested(m), {x.gid for x in out}
        for n in sorted(local, key=lambda k: k.gid):
            for x in self.scopes.shared_needs(n, self._is_leaf):  # type: ignore[attr-defined]
                if x.gid not in taken and not self.ctx.is_static(x) \
                        and (deps := self.scopes.deps(x)) and deps.isdisjoint(local):
                    taken.add(x.gid)
                    out.append(x)
        self.captures[m.gid] = out
        return out

    def _materialize(self, v: Any, pi: Def, loc: Loc | None) -> Any:
        """The record pointer of continuation v (of type pi)."""
        from verimim.runtime.cps import Clo, _HScope

        if isinstance(v, DynClo):
            return v.ptr
        if isinstance(v, Ret):
            tr = self._trampoline(("ret", pi.gid), pi, None)
            return self._store_record(tr.tag, [])
        if not isinstance(v, Clo):
            raise unsupported(f"the continuation {v!r} known only at run time", loc)
        m = v.mut
        if m.gid not in self.dyn_muts and self._has_cont(m.pi.dom):
            raise NeedDynamic(m)  # its own continuations would come from its record
        caps = self._captured(m)
        tr = self._trampoline(m.gid, m.pi, m)
        if m.gid in self._making:
            raise unsupported(f"closures known only at run time that capture each other (`{m.name}`)", loc)
        self._making.add(m.gid)
        outer, self.scope = self.scope, _HScope(v.scope, None)  # computed here, not in the creator
        try:
            leaves: list[Any] = []
            for x in caps:
                if not isinstance(x, MutLam):
                    self._compute(x)  # type: ignore[attr-defined]
                val = self._val(x)  # type: ignore[attr-defined]
                self._dflatten(self._closed(self.w.type_of(x), "a captured value", loc), val, leaves, loc)
        finally:
            self.scope = outer
            self._making.discard(m.gid)
        return self._store_record(tr.tag, leaves)

    def _select_continuation(self, iv: Any, elems: list[Any], d: Any) -> Any | None:
        """A continuation chosen at run time (`(after, adjust)#c` passed as a value): each
        candidate's record, and the one at iv, whose jumps dispatch on its tag (None: d is not
        a continuation)."""
        t = self.w.type_of(d)
        sc = self.ctx.scalar(t)
        if sc is None or sc[0] != "cont" or not isinstance(t, Pi):
            return None
        ptrs = [self._materialize(e, t, d.loc) for e in elems]
        return DynClo(self._select(iv, ptrs, d.loc), t)  # type: ignore[attr-defined]

    def _store_record(self, tag: int, leaves: list[Any]) -> Any:
        ir, b, i64 = self.ir, self.builder, self.ctx.i64
        rec = self._record(SLOT * (1 + len(leaves)))
        b.store(ir.Constant(i64, tag), rec)
        for j, x in enumerate(leaves, 1):
            b.store(x, b.gep(rec, [ir.Constant(i64, SLOT * j)], source_etype=self.ctx.i8))
        return rec

    # ------------------------------------------------------------------ records → jumps

    def _trampoline(self, key: Any, pi: Def, m: MutLam | None) -> _Trampoline:
        """The block that enters m (None: the function's return) from a record and arguments."""
        from verimim.runtime.cps import Clo, _HScope

        tr = self.trampolines.get(key)
        if tr is not None:
            return tr
        ir, ctx = self.ir, self.ctx
        dom = self._closed(pi.dom if isinstance(pi, Pi) else pi, "a continuation", None)
        bb = self.fn.append_basic_block(f"{m.name if m else 'return'}.dyn")
        b = ir.IRBuilder(bb)
        rec = b.phi(ctx.ptr)
        args = [b.phi(t) for t in self._leaf_types(dom)]
        tr = self.trampolines[key] = _Trampoline(len(self.trampolines) + 1, pi, bb, rec, args)
        saved_b, saved_s = self.builder, self.scope
        self.builder = b
        try:
            av = self._dbuild(dom, iter(args))
            if m is None:
                self._return(av, None)  # type: ignore[attr-defined]
                return tr
            sc = _HScope(self.root_scope, None)  # type: ignore[attr-defined]
            slot = 1
            for x in self._captured(m):
                t = self.w.type_of(x)
                vals = []
                for lt in self._leaf_types(t):
                    p = b.gep(rec, [ir.Constant(ctx.i64, SLOT * slot)], source_etype=ctx.i8)
                    vals.append(b.load(p, typ=lt))
                    slot += 1
                sc.vals[x.gid] = self._dbuild(t, iter(vals))
            # m's own closure, named in its body or in the continuations it makes, is this record
            sc.vals[m.gid] = DynClo(rec, pi)
            self.scope = sc
            b.branch(self._jump(Clo(m, sc), av, None))  # type: ignore[attr-defined]
        finally:
            self.builder, self.scope = saved_b, saved_s
        return tr

    def _dispatch(self, dc: DynClo, av: Any, loc: Loc | None) -> None:
        """A jump to a continuation known at run time: switch on its record's tag."""
        leaves: list[Any] = []
        pi = dc.pi
        assert isinstance(pi, Pi)
        self._dflatten(self._closed(pi.dom, "a continuation", loc), av, leaves, loc)
        b = self.builder
        if self._unreachable is None:
            self._unreachable = self.fn.append_basic_block("no_such_closure")
            self.ir.IRBuilder(self._unreachable).unreachable()
        tag = b.load(dc.ptr, typ=self.ctx.i64)
        sw = b.switch(tag, self._unreachable)
        self.dispatches.append((dc.pi, sw, b.block, dc.ptr, leaves))

    def _connect(self) -> None:
        """Every dispatch reaches every trampoline of its type (all are known only now)."""
        for pi, sw, block, ptr, leaves in self.dispatches:
            for tr in self.trampolines.values():
                if tr.pi is not pi:
                    continue
                sw.add_case(self.ir.Constant(self.ctx.i64, tr.tag), tr.block)
                tr.rec.add_incoming(ptr, block)
                for ph, v in zip(tr.args, leaves):
                    ph.add_incoming(v, block)
