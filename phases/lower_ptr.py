"""`buffer.lower_ptr`: shaped host buffers become pointers to their row-major arrays.

`buffer.Buf (r, s, T)` becomes `mem.Ptr («s; T», 0)` wherever it occurs (a type-directed
rewrite: the shared Rewriter rebuilds every type, so continuation parameters, sigmas and pis
follow), and the operations become what `verimim.plug.buffer_interp` already gives them as
meaning:

- `alloc (r, s, T) m`            → `mem.malloc («s; T», 0) (m, core.trait.size «s; T»)`
- `read (r, s, T) (m, b, idx)`   → `mem.load (m, lea chain of b by idx#0, idx#1, …)`
- `write (r, s, T) (m, b, idx, v)` → `(mem.store (m, lea chain, v), b)`
- `init (r, s, T) (m, val)`      → malloc, then `mem.store` of the whole array `val`
- `lit (r, s, T) (m, v)`         → malloc, then `mem.store` of the pack `‹s; v›`
- `shape (r, s, T) (b, i)`       → `s#i`
- `copy (r, s, T) (m, dst, src)` → `buffer.ptr_copy @«s; T» (m, dst, src)` (the bytes with their
  "initialised" shadow: a `mem.load` of a partly written `src` would fault)
- `gpu.buf_alloc_copy @(r, s, T)`   → `gpu.alloc_copy.block @«s; T»` (the seed's lambda:
  `gpu.alloc.block` + `gpu.copy_to_device.block`)
- `gpu.buf_copy_to_host @(r, s, T)` → `gpu.copy_to_host.block @«s; T»`

Malloc, not `mem.alloc`: the phase runs after `mem.alloc2malloc_repl` (in the host
sub-pipeline), so it must not introduce what that phase removes. The index chain needs a literal
rank and, for rank ≥ 2, a shape written as a tuple of dimensions (then `«s; T»` is the nested
array `«s#0; «s#1; …»»`); other reads and writes are rejected with `E-UNSUPPORTED`.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.phases.base import Phase, PhaseResult, Program, walk
from verimim.phases.rewriter import Rewriter

from verimim.diagnostics import Diagnostic, Loc
from verimim.ir.defs import App, Axiom, Def, Lit, Pack, Tuple
from verimim.frontend.loader import in_program
from verimim.ir.world import World
from verimim.phases.witness import Rewrites

BUF_OPS = ("buffer.alloc", "buffer.read", "buffer.write", "buffer.init", "buffer.lit", "buffer.shape",
           "buffer.copy", "gpu.buf_alloc_copy", "gpu.buf_copy_to_host")


def is_buffer_annex(annex: str) -> bool:
    """An annex of the buffer layer, which the phase lowers (`buffer.ptr_copy`, on pointers, is
    what it makes of `buffer.copy`)."""
    return (annex.startswith("buffer.") and annex != "buffer.ptr_copy") or annex in BUF_OPS


def uses_buffers(world: World) -> bool:
    return any(isinstance(d, Axiom) and is_buffer_annex(d.annex) for d in walk(world))


def dims_of(w: World, r: Def, s: Def) -> list[Def] | None:
    """The dimensions of a shape whose rank is a literal, when `«s; T»` nests one array per
    dimension (a tuple or a pack of dimensions, or the single Nat of rank 1); else None."""
    if not isinstance(r, Lit):
        return None
    if r.value == 1:
        return [s]
    if isinstance(s, Tuple) and len(s.ops) == r.value:
        return list(s.ops)
    if isinstance(s, Pack) and isinstance(s.shape, Lit) and s.shape.value == r.value and s.body.bvd == 0:
        return [s.body] * r.value
    return None


class _LowerPtr(Rewriter):
    def __init__(self, old: World, res: PhaseResult) -> None:
        super().__init__(old)
        self.res = res
        self.handlers: dict[str, Callable[[App, Def, Def, Def, Def], Def | None]] = {
            "buffer.alloc": self.alloc, "buffer.read": self.read, "buffer.write": self.write,
            "buffer.init": self.init, "buffer.lit": self.lit, "buffer.shape": self.shape,
            "buffer.copy": self.copy, "gpu.buf_alloc_copy": self.buf_alloc_copy,
            "gpu.buf_copy_to_host": self.buf_copy_to_host,
        }

    # ------------------------------------------------------------------ building blocks

    def array(self, s: Def, t: Def) -> Def:
        """`«s; T»`: the World nests it per dimension and collapses dimensions of size 1."""
        return self.new.arr(s, self.new.shift(t, 1))

    def ptr(self, s: Def, t: Def) -> Def:
        w = self.new
        return w.app(self.annex("mem.Ptr"), w.tuple([self.array(s, t), w.lit_nat(0)]))

    def mem_op(self, annex: str, t: Def, arg: Def) -> Def:
        """`mem.load` / `mem.store` with the implicit `{T, a = 0}`."""
        w = self.new
        return w.app(w.app(self.annex(annex), w.tuple([t, w.lit_nat(0)])), arg)

    def malloc(self, m: Def, s: Def, t: Def) -> Def:
        w = self.new
        a = self.array(s, t)
        size = w.app(self.annex("core.trait.size"), a)
        return w.app(w.app(self.annex("mem.malloc"), w.tuple([a, w.lit_nat(0)])), w.tuple([m, size]))

    def stored_fresh(self, m: Def, s: Def, t: Def, value: Def) -> Def:
        """A fresh block holding `value`: `(mem.store (mal#0, mal#1, value), mal#1)`."""
        w = self.new
        mal = self.malloc(m, s, t)
        p = w.extract_n(mal, 2, 1)
        st = self.mem_op("mem.store", self.array(s, t), w.tuple([w.extract_n(mal, 2, 0), p, value]))
        return w.tuple([st, p])

    def chain(self, old: App, p: Def, r: Def, s: Def, t: Def, idx: Def) -> Def | None:
        """The element pointer: one `mem.lea` per dimension, outermost first (row-major), each
        into the array of the remaining dimensions. A dimension of size 1 has no array level
        (`«1; X»` is X) and so no lea."""
        w = self.new
        dims = dims_of(w, r, s)
        if dims is None:
            self.unsupported(old, "a buffer access needs a literal rank and a shape written as a tuple "
                                  "of dimensions")
            return None
        if any(isinstance(d, Lit) and d.value == 0 for d in dims):
            self.unsupported(old, "an access into a buffer with a dimension of size 0")
            return None
        rank = len(dims)
        for k, d in enumerate(dims):
            if isinstance(d, Lit) and d.value == 1:
                continue
            elem = t
            for inner in reversed(dims[k + 1:]):
                elem = self.array(inner, elem)
            i = idx if rank == 1 else w.extract(idx, w.lit_idx(rank, k))
            implicit = w.tuple([d, w.pack(d, w.shift(elem, 1)), w.lit_nat(0)])
            p = w.app(w.app(self.annex("mem.lea"), implicit), w.tuple([p, i]))
        return p

    def unsupported(self, old: Def, why: str) -> None:
        self.res.diagnostics.append(Diagnostic("E-UNSUPPORTED", f"`buffer.lower_ptr`: {why}", old.loc))

    # ------------------------------------------------------------------ the operations
    # Each gets the old application and the rewritten rank, shape, element type and argument.

    def alloc(self, old: App, r: Def, s: Def, t: Def, m: Def) -> Def | None:
        return self.malloc(m, s, t)

    def read(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        m, b, idx = (w.extract_n(arg, 3, k) for k in range(3))
        p = self.chain(old, b, r, s, t, idx)
        return None if p is None else self.mem_op("mem.load", t, w.tuple([m, p]))

    def write(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        m, b, idx, v = (w.extract_n(arg, 4, k) for k in range(4))
        p = self.chain(old, b, r, s, t, idx)
        if p is None:
            return None
        return w.tuple([self.mem_op("mem.store", t, w.tuple([m, p, v])), b])

    def init(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        return self.stored_fresh(w.extract_n(arg, 2, 0), s, t, w.extract_n(arg, 2, 1))

    def lit(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        v = w.extract_n(arg, 2, 1)
        return self.stored_fresh(w.extract_n(arg, 2, 0), s, t, w.pack(s, w.shift(v, 1)))

    def shape(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        if isinstance(r, Lit) and r.value == 1:
            return s  # `i: Idx 1` is 0, and `«1; Nat»` is Nat
        return w.extract(s, w.extract_n(arg, 2, 1))

    def copy(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        # `buffer.ptr_copy` of the whole array, not a `mem.load` and `mem.store` of it: the copy
        # moves the "initialised" shadow with the bytes, a load faults on a partly unwritten
        # source (a valid program's copy became E-UNINIT).
        w = self.new
        m, dst, src = (w.extract_n(arg, 3, k) for k in range(3))
        return w.app(w.app(self.annex("buffer.ptr_copy"), self.array(s, t)), w.tuple([m, dst, src]))

    def buf_alloc_copy(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        # The seed's `alloc_copy.block` is a lambda: applying it inlines alloc + copy_to_device.
        w = self.new
        return w.app(w.app(self.annex("gpu.alloc_copy.block"), self.array(s, t)), arg)

    def buf_copy_to_host(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        return w.app(w.app(self.annex("gpu.copy_to_host.block"), self.array(s, t)), arg)

    # ------------------------------------------------------------------ the hook

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if not (isinstance(old, App) and isinstance(old.head, Axiom)):
            return None
        annex = old.head.annex
        if annex == "buffer.Buf" and old.depth == 1:
            w = self.new
            rst = ops[1]
            return self.ptr(w.extract_n(rst, 3, 1), w.extract_n(rst, 3, 2))
        handler = self.handlers.get(annex)
        if handler is None or old.depth != 2:
            return None
        assert isinstance(old.callee, App)
        w = self.new
        rst = self.rewrite(old.callee.arg)  # (r, s, T), explicit or implicit: already rewritten
        r, s, t = (w.extract_n(rst, 3, k) for k in range(3))
        new = handler(old, r, s, t, ops[1])
        if new is not None:
            self.res.rewrote(old, new)
        return new


def _btensor_use(w: World) -> tuple[str, Loc | None] | None:
    """A btensor operation left in w and where to report it: the first place the program
    applies one, else its axiom's declaration in btensor.mim; None when there is none."""
    uses = [(d.annex, d.loc) if isinstance(d, Axiom) else (d.head.annex, d.loc)  # type: ignore[union-attr]
            for d in walk(w)
            if (isinstance(d, Axiom) and d.annex.startswith("btensor."))
            or (isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith("btensor."))]
    return min(uses, key=lambda u: (not in_program(u[1]), (u[1].file, u[1].line, u[1].col) if u[1] else ("", 0, 0)),
               default=None)


class LowerPtr(Phase):
    name = "buffer.lower_ptr"

    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _LowerPtr(world, res)

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        res.witness = Rewrites()
        worlds = prog.worlds()
        if not any(uses_buffers(w) for w in worlds):
            res.skipped = "the program uses no buffer"
            return res
        for w in worlds:
            btensor = _btensor_use(w)
            if btensor is not None:
                # A map-reduce takes buffers; lowering them under it would leave it ill-typed.
                annex, loc = btensor
                res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"`buffer.lower_ptr`: `{annex}` is still present: "
                    f"`gpu.lower_btensor_map_reduce` did not lower it to a kernel (its warning says why, "
                    f"when it ran), and the native backend runs a map-reduce only as a kernel", loc))
                return res
        for w in worlds:
            self.check_declarations(w, res)
        if res.rejected:
            return res
        after = [self.make_rewriter(w, res).run() if uses_buffers(w) else w for w in worlds]
        for w in after:
            self.check_lowered(w, res)
        if res.rejected:
            return res
        res.after = Program(after[0], after[1] if len(after) > 1 else None)
        return res

    @staticmethod
    def check_declarations(world: World, res: PhaseResult) -> None:
        """After split_apply a kernel is a body-less declaration on the host: if its type held a
        buffer, the host would lower it and the device World (which this phase does not see in
        the host sub-pipeline) would not."""
        for m in world.externals.values():
            if m.body is None and any(isinstance(d, App) and isinstance(d.head, Axiom)
                                      and d.head.annex == "buffer.Buf" for d in walk(world, [m.pi])):
                res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"`buffer.lower_ptr`: the kernel `{m.name}` takes a `buffer.Buf`; a "
                    f"kernel can only take device pointers (`gpu.buf_alloc_copy` makes one)", m.loc))

    @staticmethod
    def check_lowered(world: World, res: PhaseResult) -> None:
        """What could not be lowered (a buffer operation used as a value, not applied) is an error
        here rather than a surprise for the specification."""
        for d in walk(world):
            if isinstance(d, App) and isinstance(d.head, Axiom) and is_buffer_annex(d.head.annex):
                res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"`buffer.lower_ptr`: `{d.head.annex}` is used other than fully applied",
                    d.loc))
                return
