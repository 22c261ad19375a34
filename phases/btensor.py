"""`gpu.lower_btensor_map_reduce`: each `btensor.map_reduce_post` / `btensor.map_reduce` becomes a
kernel launch (PHASES.md).

On the host, at the point where the operation ran, the enclosing continuation now does
`gpu.auto_init`, `gpu.buf_alloc_copy` of every input (`is`, then `post_is`), `gpu.alloc.block` of
the output array and jumps to ONE `gpu.launch` of a generated kernel; the launch's return
continuation allocates the output buffer (`buffer.alloc`), copies the device result into it
(`gpu.buf_copy_to_host`), frees every device buffer (`gpu.free.block`), closes the session
(`gpu.auto_deinit`) and goes on with the rest of the original body, in which the operation's
result is `(memory after auto_deinit, the new buffer)`.

The kernel runs one work-item per output cell: `n_items = min(total, 1024)`,
`n_groups = ⌈total / n_items⌉`, cell `c = group·n_items + item`; surplus work-items (`c ≥ total`)
return at once. A work-item splits `c` into its row-major output coordinates, then loops
(a recursive continuation) over the reduction points `r = 0 … R-1` in row-major order, splitting
`r` into the reduction coordinates, loading each input element and calling (a device copy of)
the user's `f`; at the end it calls `post` (when there is one) and stores the cell. Kernels have
no division (`core.div` needs a host memory token), so coordinates come from exact
multiply-and-shift division by the constant dimension sizes: for `x < B` and `2^s ≥ B·d`,
`⌊x / d⌋ = (x · ⌈2^s / d⌉) >> s`, computed in `I64` where `B ≤ 2^31` keeps it from overflowing.

Memory tokens of `f` and `post`: both are `Fn [mem.M 0, …] → [mem.M 0, …]`, but a kernel has no
host token (and must never touch host memory). The phase lowers an operation only when no
operation reachable from `f`/`post` consumes or produces a memory token of any address space (no
axiom whose type mentions `mem.M`): then the token is pure bookkeeping — no effect can happen,
none can be reordered, and the values `f` returns cannot depend on which token it got. The kernel
passes `⊥:mem.M 0` and drops the token `f` returns. Otherwise the operation is left to the host
interpreter with a warning.

An operation is skipped with a `W-UNSUPPORTED` warning (it then keeps running on the host) when
its ranks, shapes or positions are not literals, its combiner or epilogue is not a function the
phase can see (a closed `fun` with a body), it is not pure in its memory token, an element type is
not plain data, its output shape is empty (no work-item to launch) or a shape is too large, or it
is not computed in exactly one continuation.
The whole phase is skipped when the program already opens a GPU session itself (`gpu.init`, or an
`auto_init` of an earlier lowering).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from verimim.diagnostics import NO_LOC, Diagnostic, Loc
from verimim.frontend.loader import Loader
from verimim.ir.analysis import apps_with_head
from verimim.ir.defs import App, Arr, Axiom, Def, IdxT, Lit, MutLam, NatT, Sigma, Var
from verimim.ir.schedule import Scopes, postorder
from verimim.ir.world import World
from verimim.phases.base import Phase, PhaseResult, Program, walk
from verimim.phases.rewriter import Rewriter
from verimim.phases.witness import BtensorLowering, LoweredOp
from verimim.printer import show
from verimim.syntax import ast

OPS = ("btensor.map_reduce_post", "btensor.map_reduce")
DEPTH = 7  # curried arguments of a fully applied map_reduce(_post)
MAX_ITEMS = 1024
MAX_EXTENT = 2 ** 31  # bound on cells and reduction points: keeps the I64 division exact
WARNING = "W-UNSUPPORTED"


# ============================================================================ reading an operation


class NotLiteral(Exception):
    """A rank, shape or position that is not a literal at lowering time."""


def elems(w: World, d: Def, n: int) -> list[Def]:
    """The n elements of a tuple of arity n (`«1; T»` is `T`, `«0; T»` is `()`)."""
    if n == 1:
        return [d]
    return [w.extract_n(d, n, i) for i in range(n)]


def nat(d: Def, what: str) -> int:
    if isinstance(d, Lit):
        return int(d.value)
    raise NotLiteral(f"{what} `{show(d)}` is not a literal")


def nats(w: World, d: Def, n: int, what: str) -> list[int]:
    return [nat(x, what) for x in elems(w, d, n)]


@dataclass
class Operand:
    """An input buffer: element type, shape (with its node), buffer value, and the positions (of
    the loop vector for `is`, of the output cell for `post_is`) that index it."""

    elem: Def
    shape: list[int]
    shape_node: Def
    buf: Def
    positions: list[int]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class MapReduce:
    """A fully applied `btensor.map_reduce(_post)`, with every rank and shape a literal."""

    app: App
    to: Def
    tp: Def
    so: list[int]
    so_node: Def
    sr: list[int]
    f: Def
    init: Def
    post: Def | None
    ins: list[Operand]
    posts: list[Operand]
    mem: Def

    @property
    def ro(self) -> int:
        return len(self.so)

    @property
    def total(self) -> int:
        return prod(self.so)

    @property
    def red_shape(self) -> list[int]:
        return self.sr[self.ro:]

    @property
    def points(self) -> int:
        return prod(self.red_shape)


def _operands(w: World, n: int, ts: Def, rs: Def, ss: Def, bufs: Def, subs: Def, what: str) -> list[Operand]:
    out = []
    ranks = nats(w, rs, n, "the rank") if n else []
    for t, r, s, buf, sub in zip(elems(w, ts, n), ranks, elems(w, ss, n), elems(w, bufs, n), elems(w, subs, n)):
        out.append(Operand(t, nats(w, s, r, "the shape"), s, buf, nats(w, sub, r, f"the `{what}` entry")))
    return out


def read_op(w: World, app: App, args: list[Def]) -> MapReduce:
    """The operation's parts from its curried arguments (raises NotLiteral)."""
    annex = app.head.annex if isinstance(app.head, Axiom) else ""
    if annex == "btensor.map_reduce_post":
        nn, tt, shapes, imp, fns, subs_pair, vals = args
        nis, nps = nats(w, nn, 2, "the operand count")
        to, tp, ro_d, rn_d = elems(w, tt, 4)
        tis, ris, sis, tps, rps, sps = elems(w, imp, 6)
        f, init, post = elems(w, fns, 3)
        subs, post_subs = elems(w, subs_pair, 2)
        mem, is_, post_is = elems(w, vals, 3)
    else:
        nn, tt, shapes, imp, fns, subs, vals = args
        nis, nps = nat(nn, "the operand count"), 0
        to, ro_d, rn_d = elems(w, tt, 3)
        tp = to
        tis, ris, sis = elems(w, imp, 3)
        f, init = elems(w, fns, 2)
        mem, is_ = elems(w, vals, 2)
        post = None
        tps = rps = sps = post_subs = post_is = w.unit()
    ro, rn = nat(ro_d, "the output rank"), nat(rn_d, "the loop rank")
    so_node, sr_node = elems(w, shapes, 2)
    return MapReduce(app, to, tp, nats(w, so_node, ro, "the output shape"), so_node,
                     nats(w, sr_node, rn, "the loop shape"), f, init, post if annex.endswith("_post") else None,
                     _operands(w, nis, tis, ris, sis, is_, subs, "subs"),
                     _operands(w, nps, tps, rps, sps, post_is, post_subs, "post_subs"), mem)


# ============================================================================ what can be lowered


def is_data(t: Def) -> bool:
    """Plain data a kernel can hold: naturals, literal-size indices, and sigmas / arrays of them."""
    if isinstance(t, NatT):
        return True
    if isinstance(t, IdxT):
        return isinstance(t.size, Lit)
    if isinstance(t, Sigma):
        return all(f.bvd == 0 and is_data(f) for f in t.ops)
    if isinstance(t, Arr):
        return isinstance(t.shape, Lit) and t.body.bvd == 0 and is_data(t.body)
    return False


def fn_problem(world: World, fn: Def, role: str, scopes: Scopes) -> str | None:
    """Why the kernel cannot call `fn` in place of the host (None: it can)."""
    if not isinstance(fn, MutLam) or fn.body is None:
        return f"its {role} `{show(fn)[:60]}` is not a function the phase can see"
    if scopes.free(fn):
        return f"its {role} `{fn.name}` uses variables of an enclosing function"
    for d in walk(world, [fn]):
        if isinstance(d, MutLam) and d.body is None:
            return f"its {role} `{fn.name}` reaches `{d.name}`, which has no body"
        if isinstance(d, Axiom) and apps_with_head(world.type_of(d), "mem.M"):
            return (f"its {role} `{fn.name}` performs memory operations (`{d.annex}`): a kernel has no "
                    f"host memory token to give it")
    return None


def op_problem(world: World, mr: MapReduce, scopes: Scopes) -> str | None:
    if mr.so != mr.sr[:mr.ro]:
        return f"its output shape {tuple(mr.so)} is not the first {mr.ro} entries of its loop shape {tuple(mr.sr)}"
    for kind, ops, bound, limit, operand in (("subs", mr.ins, mr.sr, len(mr.sr), "input"),
                                             ("post_subs", mr.posts, mr.so, mr.ro, "post input")):
        for i, op in enumerate(ops):
            for k, p in enumerate(op.positions):
                if p >= limit:
                    return f"`{kind}` entry {p} of {operand} {i} is not a position below {limit}"
                if bound[p] > op.shape[k]:
                    return (f"{operand} {i} of shape {tuple(op.shape)} is read at indices up to {bound[p] - 1} "
                            f"in dimension {k}")
    types = [("the accumulator type", mr.to), ("the result type", mr.tp)]
    types += [(f"the element type of input {i}", op.elem) for i, op in enumerate(mr.ins + mr.posts)]
    for what, t in types:
        if not is_data(t):
            return f"{what} `{show(t)}` is not plain data"
    if 0 in mr.so:
        # no output cell: no work-item to launch (n_items = min(total, 1024) = 0 groups of none)
        return "its output shape has an empty dimension"
    if mr.total > MAX_EXTENT or mr.points > MAX_EXTENT:
        return f"it has {mr.total} cells and {mr.points} reduction points (at most {MAX_EXTENT} each)"
    for role, fn in (("combiner", mr.f), ("epilogue", mr.post)):
        if fn is not None:
            why = fn_problem(world, fn, role, scopes)
            if why:
                return why
    return None


def owners_of(world: World, scopes: Scopes, ops: set[int]) -> dict[int, list[MutLam]]:
    """For each operation, the continuations whose activations compute it (the interpreter's
    schedule: verimim.ir.schedule.Scopes.sched)."""
    def leaf(d: Def) -> bool:
        return isinstance(d, (Var, Lit, Axiom)) or (isinstance(d, MutLam) and (d.annex is not None or not scopes.free(d)))

    out: dict[int, list[MutLam]] = {g: [] for g in ops}
    for m in walk(world):
        if isinstance(m, MutLam) and m.body is not None:
            for gid in scopes.sched(m, leaf):
                if gid in out:
                    out[gid].append(m)
    return out


@dataclass
class Planned:
    op: App
    owner: MutLam
    order: int  # position in the owner's schedule: operands first


def _witness(res: PhaseResult) -> BtensorLowering:
    """The phase's witness, made on first use."""
    if not isinstance(res.witness, BtensorLowering):
        res.witness = BtensorLowering()
    return res.witness


def plan(world: World, res: PhaseResult) -> list[Planned]:
    """The operations to lower; a warning for each one left alone."""
    scopes = Scopes()
    apps = [d for d in walk(world) if isinstance(d, App) and d.depth == DEPTH and isinstance(d.head, Axiom)
            and d.head.annex in OPS]
    apps.sort(key=lambda a: (a.loc.line, a.loc.col) if a.loc else (0, 0))
    owners = owners_of(world, scopes, {a.gid for a in apps})
    out: list[Planned] = []
    for app in apps:
        why = _why_not(world, app, owners[app.gid], scopes)
        if why is not None:
            name = app.head.annex if isinstance(app.head, Axiom) else "?"
            res.diagnostics.append(Diagnostic(WARNING, f"`{name}` is not lowered to a kernel: {why}; it stays on "
                                              f"the host, where the interpreter runs it (the native backend "
                                              f"cannot: `buffer.lower_ptr` rejects it)", app.loc, "warning"))
            _witness(res).not_lowered.append((app, why))
            continue
        owner = owners[app.gid][0]
        order = [d.gid for d in postorder([owner.body], lambda d: isinstance(d, MutLam), lambda d: d.ops)]  # type: ignore[list-item]
        out.append(Planned(app, owner, order.index(app.gid)))
    return out


def _why_not(world: World, app: App, owners: list[MutLam], scopes: Scopes) -> str | None:
    try:
        mr = read_op(world, app, app.args())
    except NotLiteral as e:
        return str(e)
    why = op_problem(world, mr, scopes)
    if why:
        return why
    if len(owners) != 1:
        return f"it is computed in {len(owners)} continuations, not exactly one"
    if not world.is_cn(owners[0].pi):
        return f"it is computed inside `{owners[0].name}`, a function evaluated for its value, not a continuation"
    return None


# ============================================================================ building IR


class Builder:
    """Typed IR construction in the new World (implicit arguments applied explicitly, as the
    frontend elaborates them)."""

    def __init__(self, w: World, annex: Callable[[str], Def]) -> None:
        self.w = w
        self.annex = annex
        self.I64 = w.idx_n(2 ** 64)
        self.M0, self.M1, self.M3, self.M4, self.M5 = (self.M(s) for s in (0, 1, 3, 4, 5))

    def M(self, space: int) -> Def:
        return self.w.app(self.annex("mem.M"), self.w.lit_nat(space))

    def ptr(self, t: Def, space: int) -> Def:
        return self.w.app(self.annex("mem.Ptr"), self.tup(t, self.w.lit_nat(space)))

    def tup(self, *xs: Def) -> Def:
        return self.w.tuple(list(xs))

    def x(self, d: Def, n: int, i: int) -> Def:
        return self.w.extract_n(d, n, i)

    def xs(self, d: Def, n: int) -> list[Def]:
        return [self.x(d, n, i) for i in range(n)]

    def ap(self, name: str, *args: Def) -> Def:
        return self.w.apps(self.annex(name), *args)

    def con(self, name: str, params: list[Def], loc: Loc | None, names: tuple[str, ...] | None = None) -> tuple[MutLam, list[Def]]:
        w = self.w
        m = w.mut_lam(w.cn(w.sigma(params)), name, "con")
        m.loc = loc
        m.param_names = names
        v = w.var(m)
        return m, ([v] if len(params) == 1 else self.xs(v, len(params)))

    def branch(self, cond: Def, if_false: Def, if_true: Def, arg: Def) -> Def:
        return self.w.app(self.w.extract(self.tup(if_false, if_true), cond), arg)

    # --- integers (cell and loop counters are I64)
    def i64(self, v: int) -> Def:
        return self.w.lit(self.I64, v)

    def bitcast(self, src: Def, dst: Def, v: Def) -> Def:
        return self.ap("core.bitcast", src, dst, v)

    def wrap(self, op: str, a: Def, b: Def) -> Def:
        return self.ap(f"core.wrap.{op}", self.w.lit_nat(2 ** 64), self.w.lit_nat(0), self.tup(a, b))

    def shr(self, a: Def, bits: int) -> Def:
        return self.ap("core.shr.l", self.w.lit_nat(2 ** 64), self.tup(a, self.i64(bits)))

    def less(self, a: Def, b: int) -> Def:
        return self.ap("core.icmp.ul", self.w.lit_nat(2 ** 64), self.tup(a, self.i64(b)))

    def divmod(self, x: Def, d: int, bound: int) -> tuple[Def, Def]:
        """`(x / d, x mod d)` for `0 ≤ x < bound`, by multiply and shift (see the module doc)."""
        if d == 1:
            return x, self.i64(0)
        s = max(1, (bound * d - 1).bit_length())  # 2^s ≥ bound·d
        magic = -(-(1 << s) // d)
        if bound * magic >= 2 ** 64 or s >= 64:
            raise ValueError(f"no exact I64 division by {d} below {bound}")
        q = self.shr(self.wrap("mul", x, self.i64(magic)), s)
        return q, self.wrap("sub", x, self.wrap("mul", q, self.i64(d)))

    # --- memory
    def lea(self, p: Def, shape: list[int], elem: Def, idx: list[Def], space: int) -> Def:
        """`p: Ptr («shape; elem», space)` indexed by I64 coordinates; dimensions of size 1 are
        no dimensions (`«1; T» = T`)."""
        w = self.w
        for k, (n, i) in enumerate(zip(shape, idx)):
            if n == 1:
                continue
            inner = w.arr(self.shape_node(shape[k + 1:]), elem)
            ts = w.pack(w.lit_nat(n), inner)
            p = self.ap("mem.lea", self.tup(w.lit_nat(n), ts, w.lit_nat(space)),
                        self.tup(p, self.bitcast(self.I64, w.idx_n(n), i)))
        return p

    def shape_node(self, shape: list[int]) -> Def:
        w = self.w
        return w.lit_nat(shape[0]) if len(shape) == 1 else w.tuple(w.lit_nat(n) for n in shape)

    def load(self, t: Def, m: Def, p: Def) -> tuple[Def, Def]:
        r = self.ap("mem.load", self.tup(t, self.w.lit_nat(1)), self.tup(m, p))
        return self.x(r, 2, 0), self.x(r, 2, 1)

    def store(self, t: Def, m: Def, p: Def, v: Def) -> Def:
        return self.ap("mem.store", self.tup(t, self.w.lit_nat(1)), self.tup(m, p, v))


def decompose(b: Builder, x: Def, shape: list[int], order: list[int]) -> list[Def]:
    """The coordinates of the linear index `x < prod(shape)` in `shape`, peeling dimensions off in
    `order` (least significant first: row-major is the last dimension first)."""
    coords: list[Def] = [b.i64(0)] * len(shape)
    bound = prod(shape)
    for pos, k in enumerate(order):
        if pos == len(order) - 1:
            coords[k] = x  # the most significant coordinate is what remains
            break
        x, coords[k] = b.divmod(x, shape[k], bound)
        bound = -(-bound // shape[k])
    return coords


# ============================================================================ the kernel


@dataclass
class Launch:
    """What the host side needs of a generated kernel."""

    kernel: MutLam
    n_groups: int
    n_items: int
    arg_types: list[Def]


@dataclass
class KernelGen:
    """Generates the kernel of one operation. The hooks (`config`, `loop_bound`, `red_order`,
    `guard`) are what deliberately wrong variants of the phase override in the tests."""

    phase: LowerBtensor
    b: Builder
    mr: MapReduce
    f: MutLam
    post: MutLam | None
    name: str
    loc: Loc | None
    exit: tuple[Def, ...] = ()  # the kernel's return continuation and its untouched tokens

    def ret(self, m1: Def) -> Def:
        ret, m3, m4, m5 = self.exit
        return self.b.w.app(ret, self.b.tup(m1, m3, m4, m5))

    def build(self) -> Launch:
        b, mr, w = self.b, self.mr, self.b.w
        n_groups, n_items = self.phase.config(mr.total)
        in_ptrs = [b.ptr(w.arr(op.shape_node, op.elem), 1) for op in mr.ins + mr.posts]
        out_ptr = b.ptr(w.arr(mr.so_node, mr.tp), 1)
        arg_types = in_ptrs + [out_ptr, mr.to]
        ret_t = w.cn(w.sigma([b.M1, b.M3, b.M4, b.M5]))
        kernel, ps = b.con(self.name, [b.M1, b.M3, b.M4, b.M5, w.idx_n(n_groups), w.idx_n(n_items), w.unit_t(),
                                       w.sigma(arg_types), ret_t], self.loc,
                           ("m1", "m3", "m4", "m5", "group_id", "item_id", "smem", "args", "return"))
        m1, m3, m4, m5, group, item, _smem, args, ret = ps
        argv = b.xs(args, len(arg_types))
        self.exit = (ret, m3, m4, m5)
        cell = b.wrap("add", b.wrap("mul", b.bitcast(w.idx_n(n_groups), b.I64, group), b.i64(n_items)),
                      b.bitcast(w.idx_n(n_items), b.I64, item))
        work = self.work(cell, argv)
        if self.phase.guard:
            done, (dm1,) = b.con("surplus", [b.M1], self.loc, ("m1",))
            done.body = self.ret(dm1)
            kernel.body = b.branch(b.less(cell, mr.total), done, work, m1)
        else:
            kernel.body = w.app(work, m1)
        return Launch(kernel, n_groups, n_items, arg_types)

    def work(self, cell: Def, argv: list[Def]) -> MutLam:
        """The work of one cell: the fold loop, then the epilogue and the store."""
        b, mr, w = self.b, self.mr, self.b.w
        nin = len(mr.ins)
        ins, posts, out, init = argv[:nin], argv[nin:-2], argv[-2], argv[-1]
        o = decompose(b, cell, mr.so, list(reversed(range(mr.ro)))) if mr.ro else []
        work, (wm1,) = b.con("cell", [b.M1], self.loc, ("m1",))
        finish = self.finish(o, posts, out)
        if mr.points == 0:
            # an empty reduction: the cell is its initial value (no point to decompose, no
            # input element to address: an empty dimension's array has none)
            work.body = w.app(finish, b.tup(wm1, init))
            return work
        loop, (lm1, r, acc) = b.con("fold", [b.M1, b.I64, mr.to], self.loc, ("m1", "r", "acc"))
        body, (bm1, bacc) = b.con("step", [b.M1, mr.to], self.loc, ("m1", "acc"))
        work.body = w.app(loop, b.tup(wm1, b.i64(0), init))
        loop.body = b.branch(b.less(r, self.phase.loop_bound(mr.points)), finish, body, b.tup(lm1, acc))
        red = mr.red_shape
        v = o + (decompose(b, r, red, self.phase.red_order(len(red))) if red else [])
        m, xs = bm1, []
        for op, ptr in zip(mr.ins, ins):
            m, x = b.load(op.elem, m, b.lea(ptr, op.shape, op.elem, [v[p] for p in op.positions], 1))
            xs.append(x)
        nxt, (_tok, acc2) = b.con("folded", [b.M0, mr.to], self.loc, ("m0", "acc"))
        nxt.body = w.app(loop, b.tup(m, b.wrap("add", r, b.i64(1)), acc2))
        body.body = self.call(self.f, bacc, xs, nxt)
        return work

    def finish(self, o: list[Def], posts: list[Def], out: Def) -> MutLam:
        b, mr = self.b, self.mr
        fin, (fm1, facc) = b.con("epilogue", [b.M1, mr.to], self.loc, ("m1", "acc"))
        m, ys = fm1, []
        for op, ptr in zip(mr.posts, posts):
            m, y = b.load(op.elem, m, b.lea(ptr, op.shape, op.elem, [o[p] for p in op.positions], 1))
            ys.append(y)
        target = b.lea(out, mr.so, mr.tp, o, 1)
        if self.post is None:
            fin.body = self.ret(b.store(mr.tp, m, target, facc))
            return fin
        store, (_tok, val) = b.con("store", [b.M0, mr.tp], self.loc, ("m0", "val"))
        store.body = self.ret(b.store(mr.tp, m, target, val))
        fin.body = self.call(self.post, facc, ys, store)
        return fin

    def call(self, fn: MutLam, acc: Def, xs: list[Def], k: MutLam) -> Def:
        """`fn $ (⊥:mem.M 0, acc, xs)` continuing with `k`: fn is pure in its token (see the
        module doc), so the bottom token is never used for an effect."""
        b, w = self.b, self.b.w
        arg = b.tup(w.bot(b.M0), acc, b.tup(*xs) if len(xs) != 1 else xs[0])
        return w.app(fn, b.tup(arg, k))


# ============================================================================ the rewriter


class _Clone(Rewriter):
    """A device copy of a combiner and everything it reaches, renamed, so that a function the host
    also calls does not end up on both sides of `split_apply`."""

    def __init__(self, parent: _Lower) -> None:
        super().__init__(parent.old, parent.new)
        self.parent = parent

    def rewrite_mut(self, old: MutLam) -> Def | None:
        if old.annex is not None:
            return self.parent.rewrite(old)
        nm = self.copy_mut(old)
        nm.name = f"{old.name}_device"
        nm.external = False
        return nm


@dataclass
class Link:
    """One lowered operation in its owner's chain: the host jump to the launch and the launch's
    return continuation."""

    planned: Planned
    jump: Def
    cont: MutLam


class _Lower(Rewriter):
    def __init__(self, old: World, phase: LowerBtensor, todo: list[Planned], res: PhaseResult) -> None:
        super().__init__(old)
        self.phase = phase
        self.todo = {p.op.gid: p for p in todo}
        self.res = res
        self.links: dict[int, list[Link]] = {}
        self.clones: dict[int, MutLam] = {}
        if old.find_annex("gpu.launch") is None:
            # A program may use btensor without naming the gpu plugin; its lowering needs it.
            Loader(self.new).load_import(ast.Import(NO_LOC, "plugin", "gpu"))
        self.b = Builder(self.new, self.annex)
        self.taken = {m.name for m in walk(old) if isinstance(m, MutLam) and m.name}

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        p = self.todo.get(old.gid)
        return self.lower(p) if p is not None else None

    def annex(self, name: str) -> Def:
        if self.old.find_annex(name) is None and name in self.new.annexes:
            return self.new.annexes[name]
        return super().annex(name)

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def clone(self, fn: Def) -> MutLam:
        assert isinstance(fn, MutLam)
        hit = self.clones.get(fn.gid)
        if hit is None:
            c = _Clone(self)
            hit = c.rewrite(fn)  # type: ignore[assignment]
            c.finish()
            assert isinstance(hit, MutLam)
            self.clones[fn.gid] = hit
        return hit

    def lower(self, p: Planned) -> Def:
        b, w, loc = self.b, self.new, p.op.loc
        mr = read_op(w, p.op, [self.rewrite(a) for a in p.op.args()])
        old = read_op(self.old, p.op, p.op.args())
        gen = KernelGen(self.phase, b, mr, self.clone(old.f), self.clone(old.post) if old.post is not None else None,
                        self.fresh("btensor_kernel"), loc)
        launch = gen.build()
        # Host, before the launch.
        r = b.ap("gpu.auto_init", mr.mem)
        m0, m1, m4 = b.xs(r, 3)
        devs = []
        for op in mr.ins + mr.posts:
            rst = b.tup(w.lit_nat(op.rank), op.shape_node, op.elem)
            m0, m1, d = b.xs(b.ap("gpu.buf_alloc_copy", rst, b.tup(m0, m1, op.buf)), 3)
            devs.append((d, w.arr(op.shape_node, op.elem)))
        out_t = w.arr(mr.so_node, mr.tp)
        m1, d_out = b.xs(b.ap("gpu.alloc.block", out_t, m1), 2)
        n = len(launch.arg_types)
        cfg = b.tup(w.lit_nat(launch.n_groups), w.lit_nat(launch.n_items), self.annex("gpu.default_stream"),
                    w.lit_bool(False), w.unit())
        site = b.ap("gpu.launch", b.tup(w.lit_nat(n), w.tuple(launch.arg_types)), cfg, launch.kernel,
                    b.tup(*[d for d, _ in devs], d_out, mr.init))
        site.loc = loc
        cont, (k0, k1, k4) = b.con(self.fresh("btensor_done"), [b.M0, b.M1, b.M4], loc, ("m0", "m1", "m4"))
        jump = w.app(site, b.tup(b.tup(m0, m1, m4), cont))
        jump.loc = loc  # the launch is where the program applied the map-reduce
        # Host, after the launch.
        rst_out = b.tup(w.lit_nat(mr.ro), mr.so_node, mr.tp)
        k0, host = b.xs(b.ap("buffer.alloc", rst_out, k0), 2)
        if self.phase.copy_back:
            k0, k1 = b.xs(b.ap("gpu.buf_copy_to_host", rst_out, b.tup(k0, k1, d_out, host)), 2)
        for d, t in devs + [(d_out, out_t)]:
            k1 = b.ap("gpu.free.block", t, b.tup(k1, d))
        m0_end = b.ap("gpu.auto_deinit", b.tup(k0, k1, k4))
        self.links.setdefault(p.owner.gid, []).append(Link(p, jump, cont))
        _witness(self.res).lowered.append(
            LoweredOp(p.op, jump, launch.kernel, cont, launch.n_groups, launch.n_items))
        return b.tup(m0_end, host)

    def finish(self) -> None:
        super().finish()
        # Each owner's body becomes: prefix₁ → launch₁ → k₁: prefix₂ → … → kₙ: the original body.
        for gid, links in self.links.items():
            owner = self.memo[gid]
            assert isinstance(owner, MutLam)
            links.sort(key=lambda l: l.planned.order)
            rest = owner.body
            holder = owner
            for link in links:
                holder.body = link.jump
                holder = link.cont
            holder.body = rest


# ============================================================================ the phase


class LowerBtensor(Phase):
    name = "gpu.lower_btensor_map_reduce"
    whole_program = True
    guard = True      # surplus work-items return
    copy_back = True  # the result is copied to the host buffer

    # ------------------------------------------------------------------ hooks (overridden by the
    # deliberately wrong variants of tests/smt/test_btensor.py)

    def config(self, total: int) -> tuple[int, int]:
        """(n_groups, n_items) for `total` cells."""
        n_items = min(total, MAX_ITEMS)
        return -(-total // n_items), n_items

    def loop_bound(self, points: int) -> int:
        return points

    def red_order(self, rank: int) -> list[int]:
        """The reduction dimensions, least significant first: row-major."""
        return list(reversed(range(rank)))

    # ------------------------------------------------------------------

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        world = prog.host
        if prog.device is not None:
            res.skipped = "the program is already split into host and device"
            return res
        nodes = list(walk(world))
        if not any(isinstance(d, Axiom) and d.annex.startswith("btensor.") for d in nodes):
            res.skipped = "the program does not use btensor"
            return res
        sessions = {d.annex for d in nodes if isinstance(d, Axiom) and d.annex in ("gpu.init", "gpu.auto_init")}
        if "gpu.init" in sessions:
            res.skipped = "the program already contains an explicit gpu.init"
            return res
        if sessions:
            # Beyond the seed (which names only an explicit init): a session the program opens
            # with the compiler's own axiom may enclose the operation, and the sessions the
            # lowering opens would nest in it (E-GPU-SESSION where the source ran).
            res.skipped = ("the program already opens a GPU session with gpu.auto_init, which the "
                           "lowering's own sessions could nest in")
            return res
        res.witness = BtensorLowering()
        todo = plan(world, res)
        if not todo:
            return res
        res.after = Program(_Lower(world, self, todo, res).run())
        return res
