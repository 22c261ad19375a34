"""Specification of `gpu.lower_btensor_map_reduce` (PHASES.md): for the concrete shapes, for all
input values and every output cell, the kernel computes the map-reduce fold.

The statement is built from the program before the phase and the program after it, never by
running the phase's code:

1. The reference: the ORIGINAL `btensor.map_reduce(_post)` application's literal shapes, `subs`
   and `post_subs` give, for each output cell `o`, the fold of PLUGINS.md as a Z3 term:
   `post(f(…f(f(init, in[v₀]), in[v₁])…), post_in[o])`, with `f` and `post` UNINTERPRETED
   functions and every input buffer a symbolic array. Proving the kernel equal for uninterpreted
   `f` proves it for every `f`, associative or not (the order is part of the meaning).
2. The kernel: executed symbolically for every concrete `(group, item)` pair of the launch (ids
   are concrete, so all index arithmetic is concrete; loops unroll to their concrete trip
   counts, up to `STEP_BOUND` evaluated nodes per kernel — beyond it the answer is `unknown`).
   A call of (a structural copy of) `f`/`post` applies the uninterpreted function; loads read the
   symbolic arrays of the host buffers the launch's arguments were copied from; stores are
   collected per cell. Out-of-bounds accesses, a cell never written or written twice, and stores
   into inputs are refuted directly; so are accesses whose `mem.lea`/`mem.load`/`mem.store` name
   another type than the buffer's layout (the code generators compute addresses and sizes from
   those types, and no phase output is type-checked again), and a kernel whose ids or arguments
   are not typed as its launch demands. Then Z3 is asked for input values and an `f` that make
   some cell differ from the reference.
3. The host side, from the launch site: one `gpu.auto_init` taking the operation's memory token,
   then only `gpu.buf_alloc_copy` of every input and `gpu.alloc.block` of the output on the tokens
   up to the launch (`n_items = min(total, 1024)`, `n_groups = ⌈total / n_items⌉`); in the launch's
   return continuation only `buffer.alloc` of the result buffer, `gpu.buf_copy_to_host` of the
   output into it, `gpu.free.block` of every device buffer (the output after the copy) and the
   `gpu.auto_deinit` that ends the tokens.
4. The rest of the program is unchanged: a structural match of the two Worlds in which the
   owner's body continues after the last launch, `op#0` is the memory after `auto_deinit` and
   `op#1` the new buffer.

Soundness of the token: the kernel calls `f` with a token of its own; this is only equivalent
when `f` (and `post`) perform no memory operation, which is checked here independently.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from math import prod
from typing import Any, cast

import z3

from verimim.ir.analysis import apps_with_head
from verimim.ir.defs import (
    App, Arr, Axiom, Bot, Def, Extract, IdxT, Lit, MutLam, NatT, Pack, Pi, Sigma, Top, Tuple, TypeU, Var,
)
from verimim.ir.schedule import Scopes, schedule
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, walk
from verimim.phases.witness import BtensorLowering
from verimim.plug import core_ops
from verimim.printer import show
from verimim.smt.match import Matcher, app_parts
from verimim.smt.names import Namer
from verimim.smt.solver import Outcome, SpecContext
from verimim.smt.specs import spec

STEP_BOUND = 3_000_000  # evaluated kernel nodes over all work-items of one launch
MAX_ITEMS = 1024


class Refuted(Exception):
    def __init__(self, detail: str, cex: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.cex = cex or {}


class Unknown(Exception):
    """Something the specification cannot decide (an unsupported construct, the step bound)."""


# ============================================================================ the reference


def _elems(w: World, d: Def, n: int) -> list[Def]:
    return [d] if n == 1 else [w.extract_n(d, n, i) for i in range(n)]


def _lits(w: World, d: Def, n: int, what: str) -> list[int]:
    out = []
    for x in _elems(w, d, n):
        if not isinstance(x, Lit):
            raise Refuted(f"an operation whose {what} `{show(x)}` is not a literal was lowered")
        out.append(int(x.value))
    return out


@dataclass
class Input:
    elem: Def
    shape: list[int]
    positions: list[int]
    buf: Def


@dataclass
class Ref:
    """The operation before the phase, as PLUGINS.md reads it."""

    app: App
    to: Def
    tp: Def
    so: list[int]
    sr: list[int]
    f: Def
    init: Def
    post: Def | None
    ins: list[Input]
    posts: list[Input]
    mem: Def

    @property
    def total(self) -> int:
        return prod(self.so)


def _inputs(w: World, n: int, ts: Def, rs: Def, ss: Def, bufs: Def, subs: Def) -> list[Input]:
    if n == 0:
        return []
    out = []
    ranks = _lits(w, rs, n, "rank")
    for t, r, s, b, sub in zip(_elems(w, ts, n), ranks, _elems(w, ss, n), _elems(w, bufs, n), _elems(w, subs, n)):
        out.append(Input(t, _lits(w, s, r, "shape") if r else [], _lits(w, sub, r, "position") if r else [], b))
    return out


def read_ref(w: World, app: App) -> Ref:
    a = app.args()
    head = app.head
    post_form = isinstance(head, Axiom) and head.annex == "btensor.map_reduce_post"
    if post_form:
        nis, nps = _lits(w, a[0], 2, "operand count")
        to, tp, ro, rn = _elems(w, a[1], 4)
        tis, ris, sis, tps, rps, sps = _elems(w, a[3], 6)
        f, init, post = _elems(w, a[4], 3)
        subs, post_subs = _elems(w, a[5], 2)
        mem, is_, post_is = _elems(w, a[6], 3)
    else:
        nis, nps = _lits(w, a[0], 1, "operand count")[0], 0
        to, ro, rn = _elems(w, a[1], 3)
        tp = to
        tis, ris, sis = _elems(w, a[3], 3)
        f, init = _elems(w, a[4], 2)
        subs = a[5]
        mem, is_ = _elems(w, a[6], 2)
        post = tps = rps = sps = post_subs = post_is = w.unit()  # unused: nps = 0
    ro_v, rn_v = _lits(w, ro, 1, "output rank")[0], _lits(w, rn, 1, "loop rank")[0]
    so, sr = _elems(w, a[2], 2)
    ins = _inputs(w, nis, tis, ris, sis, is_, subs)
    posts = _inputs(w, nps, tps, rps, sps, post_is, post_subs)
    return Ref(app, to, tp, _lits(w, so, ro_v, "output shape") if ro_v else [],
               _lits(w, sr, rn_v, "loop shape") if rn_v else [], f, init, post if post_form else None, ins, posts, mem)


# ============================================================================ Z3 values


def _same_type(a: Def, b: Def) -> bool:
    """Types of two Worlds compared by structure (smt/names.py), not by how they print."""
    namer = Namer()
    return namer.key(a) == namer.key(b)


class Sorts:
    def __init__(self) -> None:
        self.declared: dict[str, z3.SortRef] = {}
        self.namer = Namer()

    def of(self, t: Def) -> z3.SortRef:
        if isinstance(t, NatT):
            return z3.IntSort()
        if isinstance(t, IdxT) and isinstance(t.size, Lit):
            return z3.BitVecSort(max(1, (int(t.size.value) - 1).bit_length()))
        key = self.namer.key(t)  # one sort per type, by structure (the printer may show it two ways)
        if key not in self.declared:
            self.declared[key] = z3.DeclareSort(f"{show(t)[:40]}#{key}")
        return self.declared[key]


def coerce(v: Any, sort: z3.SortRef) -> z3.ExprRef:
    if isinstance(v, z3.ExprRef):
        if v.sort() != sort:
            raise Refuted(f"a value of sort {v.sort()} where {sort} is expected")
        return v
    if isinstance(v, int):
        if sort == z3.IntSort():
            return z3.IntVal(v)
        if isinstance(sort, z3.BitVecSortRef):
            return z3.BitVecVal(v, sort.size())
    raise Unknown(f"the value {v!r} of sort {sort} cannot be compared")


@dataclass
class Model:
    """The symbolic inputs: one array per host buffer, the uninterpreted functions, init."""

    sorts: Sorts
    arrays: dict[int, z3.ArrayRef] = field(default_factory=dict)  # old buffer node gid → contents
    funs: dict[int, z3.FuncDeclRef] = field(default_factory=dict)  # old function gid → symbol

    def array(self, inp: Input, name: str) -> z3.ArrayRef:
        hit = self.arrays.get(inp.buf.gid)
        if hit is None:
            hit = self.arrays[inp.buf.gid] = z3.Array(name, z3.IntSort(), self.sorts.of(inp.elem))
        return hit

    def fun(self, fn: Def, name: str, acc: Def, args: list[Def], result: Def) -> z3.FuncDeclRef:
        """One uninterpreted function per Mim function (`f` and `post` may be the same one)."""
        hit = self.funs.get(fn.gid)
        if hit is None:
            sig = [self.sorts.of(t) for t in [acc, *args, result]]
            hit = self.funs[fn.gid] = z3.Function(name, *sig)
        return hit


def linear(shape: list[int], idx: list[int]) -> int:
    k = 0
    for d, i in zip(shape, idx):
        k = k * d + i
    return k


def reference(ref: Ref, mdl: Model, init: z3.ExprRef) -> list[z3.ExprRef]:
    """The value of every output cell, row-major, as PLUGINS.md defines the fold."""
    ro = len(ref.so)
    f = mdl.fun(ref.f, "f", ref.to, [i.elem for i in ref.ins], ref.to)
    if ref.post is not None and ref.post is not ref.f and Matcher().run([(ref.f, ref.post)]) is None:
        # `post` is written exactly as `f` (two funs with one body): one function, so one symbol;
        # the kernel's copies cannot tell them apart (Kernel.role names either `f`), nor need to
        mdl.funs[ref.post.gid] = f
    post = mdl.fun(ref.post, "post", ref.to, [i.elem for i in ref.posts], ref.tp) if ref.post is not None else None
    arrays = [mdl.array(i, f"in{k}") for k, i in enumerate(ref.ins)]
    parrays = [mdl.array(i, f"post_in{k}") for k, i in enumerate(ref.posts)]
    out = []
    for o in itertools.product(*[range(d) for d in ref.so]):
        acc = init
        for red in itertools.product(*[range(d) for d in ref.sr[ro:]]):
            v = o + red
            xs = [a[linear(i.shape, [v[p] for p in i.positions])] for a, i in zip(arrays, ref.ins)]
            acc = f(acc, *xs)
        if post is not None:
            ys = [a[linear(i.shape, [o[p] for p in i.positions])] for a, i in zip(parrays, ref.posts)]
            acc = post(acc, *ys)
        out.append(acc)
    return out


# ============================================================================ the host side


Pairs = list[tuple[Def, Def]]


def lowered_rule(done: dict[int, tuple[Def, Def]]) -> Any:
    """What a lowered operation's result became: `op#0` the memory after `gpu.auto_deinit`, `op#1`
    the result buffer (None: not a lowered operation's result)."""
    def rule(a: Def, b: Def) -> Pairs | None:
        if isinstance(a, Extract) and isinstance(a.index, Lit) and a.tup.gid in done:
            return [] if b is done[a.tup.gid][int(a.index.value)] else None
        if a.gid in done:
            return [] if isinstance(b, Tuple) and b.ops == done[a.gid] else None
        return None
    return rule


@dataclass
class Same:
    """Whether a host expression of the new World is the old one, given what the lowered
    operations' results became (mutables by name: their bodies are compared by the whole-program
    match, `check_rest`)."""

    done: dict[int, tuple[Def, Def]]

    def __call__(self, old: Def, new: Def) -> bool:
        results = lowered_rule(self.done)

        def rule(a: Def, b: Def) -> Pairs | None:
            if isinstance(a, MutLam) and isinstance(b, MutLam) and a.name == b.name:
                return []
            return results(a, b)
        return Matcher(rule).run([(old, new)]) is None


def _proj(d: Def, annex: str, depth: int) -> tuple[App, int] | None:
    """`d = app#i` with `app` a fully applied `annex`: (app, i)."""
    if isinstance(d, Extract) and isinstance(d.index, Lit) and app_parts(d.tup, annex, depth) is not None:
        return d.tup, int(d.index.value)  # type: ignore[return-value]
    return None


@dataclass
class DevBuf:
    kind: str  # "in" (a copy of a host buffer) or "out"
    node: Def  # the device pointer at the launch site
    inputs: list[int] = field(default_factory=list)  # for "in": the reference operands it holds
    shape: list[int] = field(default_factory=list)
    elem: Def | None = None
    host_buf: Def | None = None  # for "in": the host buffer it was copied from
    layout: Def | None = None  # the type of the data it holds (new World): what the kernel's accesses must say


@dataclass
class Host:
    kernel: MutLam
    n_groups: int
    n_items: int
    args: list[Any]  # per launch argument: a DevBuf or a host value node
    cont: MutLam
    m0_end: Def
    result: Def
    token: Def  # what `gpu.auto_init` takes


def _shape_of(w: World, rst: Def) -> tuple[list[int], Def]:
    r, s, t = _elems(w, rst, 3)
    rank = _lits(w, r, 1, "rank")[0]
    return (_lits(w, s, rank, "shape") if rank else []), t


def host_side(old: World, w: World, ref: Ref, jump: Def) -> Host:
    """The structure around the launch (what it takes from the host is matched later, by
    `match_inputs`, once every lowered operation's result is known)."""
    if not isinstance(jump, App):
        raise Refuted("the logged launch is not a jump")
    site = app_parts(jump.callee, "gpu.launch", 4)
    if site is None:
        raise Refuted(f"the operation at {ref.app.loc} is not replaced by a `gpu.launch`")
    imp, cfg, kernel, kargs = site
    ng, ni, stream, dyn, _mt = _elems(w, cfg, 5)
    if not (isinstance(ng, Lit) and isinstance(ni, Lit)):
        raise Refuted("the launch configuration is not literal")
    n_groups, n_items = int(ng.value), int(ni.value)
    if not (isinstance(stream, Axiom) and stream.annex == "gpu.default_stream") or not (isinstance(dyn, Lit) and dyn.value == 0):
        raise Refuted("the launch is not a blocking default-stream launch without dynamic shared memory")
    if not isinstance(kernel, MutLam) or kernel.body is None:
        raise Refuted("the launched kernel is not a continuation with a body")
    n = _lits(w, w.extract_n(imp, 2, 0), 1, "argument count")[0]
    _check_signature(w, kernel, n_groups, n_items, _elems(w, w.extract_n(imp, 2, 1), n), _elems(w, kargs, n))
    mems, cont = _elems(w, jump.arg, 2)
    if not isinstance(cont, MutLam) or cont.body is None:
        raise Refuted("the launch does not continue with a continuation")
    m0, m1, m4 = _elems(w, mems, 3)
    # Before the launch: auto_init, then copies and allocations only.
    copies: list[App] = []
    allocs: list[App] = []
    init_app = _chain_back(m1, 1, {"gpu.buf_alloc_copy": (2, 1), "gpu.alloc.block": (2, 0)}, copies, allocs)
    copies0: list[App] = []
    init0 = _chain_back(m0, 0, {"gpu.buf_alloc_copy": (2, 0)}, copies0, [])
    p4 = _proj(m4, "gpu.auto_init", 1)
    if init_app is None or init_app is not init0 or p4 is None or p4[0] is not init_app or p4[1] != 2:
        raise Refuted("the launch's memory tokens do not all come from one `gpu.auto_init` through copies and "
                      "allocations only")
    if [c.gid for c in copies] != [c.gid for c in copies0]:
        raise Refuted("host and device tokens pass through different copies")
    args: list[Any] = []
    for a in _elems(w, kargs, n):
        pc, pa = _proj(a, "gpu.buf_alloc_copy", 2), _proj(a, "gpu.alloc.block", 2)
        if pc is not None and pc[1] == 2 and pc[0] in copies:
            shape, elem = _shape_of(w, app_parts(pc[0], "gpu.buf_alloc_copy", 2)[0])  # type: ignore[index]
            layout = w.arr(_shape_node(w, shape), elem) if shape else elem
            args.append(DevBuf("in", a, [], shape, elem, w.extract_n(pc[0].arg, 3, 2), layout))
        elif pa is not None and pa[1] == 1 and pa[0] in allocs:
            args.append(DevBuf("out", a))
        else:
            args.append(a)
    outs = [x for x in args if isinstance(x, DevBuf) and x.kind == "out"]
    if len(outs) != 1:
        raise Refuted(f"the kernel gets {len(outs)} freshly allocated device buffers, not one output")
    out = outs[0]
    alloc_t = app_parts(_proj(out.node, "gpu.alloc.block", 2)[0], "gpu.alloc.block", 2)[0]  # type: ignore[index]
    want_t = old.arr(_shape_node(old, ref.so), ref.tp) if ref.so else ref.tp
    if not _same_type(alloc_t, want_t):
        raise Refuted(f"the output is allocated as `{show(alloc_t)}`, not as `{show(want_t)}`")
    out.layout = alloc_t
    m0_end, result = _after(w, ref, cont, out, [x for x in args if isinstance(x, DevBuf)])
    return Host(kernel, n_groups, n_items, args, cont, m0_end, result, init_app.arg)


def _check_signature(w: World, kernel: MutLam, n_groups: int, n_items: int, ts: list[Def], kargs: list[Def]) -> None:
    """The launch is typed as gpu.mim's `gpu.launch` demands (no phase output is type-checked
    again, and the symbolic run below reads values, not types): the kernel takes its work-group
    and work-item ids as `Idx n_groups` and `Idx n_items` (the code generators hold an id in its
    declared type, so a smaller one would see the launch's ids reduced) and its arguments as the
    launch's `Ts`, which are the types of the values passed."""
    dom = kernel.pi.dom
    fields = dom.ops if isinstance(dom, Sigma) else ()
    if len(fields) > 7 and not _same_type(fields[7], w.sigma(ts)):
        raise Refuted(f"the kernel `{kernel.name}` takes its arguments as `{show(fields[7])[:120]}`, but the launch "
                      f"passes `{show(w.sigma(ts))[:120]}`")
    for j, (t, a) in enumerate(zip(ts, kargs)):
        if not _same_type(w.type_of(a), t):
            raise Refuted(f"launch argument {j} `{show(a)[:60]}` is a `{show(w.type_of(a))[:60]}`, passed as `{show(t)[:60]}`")
    for k, (what, n) in ((4, ("work-group", n_groups)), (5, ("work-item", n_items))):
        t = fields[k] if len(fields) > k else None
        if not (isinstance(t, IdxT) and isinstance(t.size, Lit) and int(t.size.value) == n):
            raise Refuted(f"the kernel `{kernel.name}` takes its {what} id as `{show(t) if t is not None else '?'}`, "
                          f"but the launch has {n} {what}s (gpu.launch: `Idx {n}`)",
                          {"kernel": kernel.name, "declared": show(t) if t is not None else None, "launched": n})


def match_inputs(ref: Ref, host: Host, same: Same) -> None:
    """The session starts from the operation's memory, and every input buffer (only those) is
    copied to the device with its shape."""
    if not same(ref.mem, host.token):
        raise Refuted("`gpu.auto_init` does not take the operation's memory token")
    all_inputs = ref.ins + ref.posts
    for d in host.args:
        if isinstance(d, DevBuf) and d.kind == "in":
            d.inputs = [k for k, inp in enumerate(all_inputs) if inp.shape == d.shape
                        and same(inp.elem, d.elem) and same(inp.buf, d.host_buf)]  # type: ignore[arg-type]
            if not d.inputs:
                raise Refuted(f"the kernel gets a copy of `{show(d.host_buf)[:80]}`, which is no input of the "  # type: ignore[arg-type]
                              f"operation at {ref.app.loc}")
    for k, inp in enumerate(all_inputs):
        if not any(isinstance(x, DevBuf) and k in x.inputs for x in host.args):
            raise Refuted(f"input {k} (`{show(inp.buf)[:80]}`) of the operation at {ref.app.loc} is not copied "
                          f"to the kernel", {"input": k})


def check_config(ref: Ref, host: Host) -> None:
    """PHASES.md's launch shape (checked after the kernel, whose coverage is the deeper fact)."""
    want_items = min(ref.total, MAX_ITEMS)
    want_groups = -(-ref.total // want_items)
    if (host.n_groups, host.n_items) != (want_groups, want_items):
        raise Refuted(f"the launch has {host.n_groups} group(s) of {host.n_items} items for {ref.total} cells; "
                      f"PHASES.md demands {want_groups} of {want_items}",
                      {"n_groups": host.n_groups, "n_items": host.n_items, "cells": ref.total})


def _shape_node(w: World, shape: list[int]) -> Def:
    return w.lit_nat(shape[0]) if len(shape) == 1 else w.tuple(w.lit_nat(n) for n in shape)


def _chain_back(tok: Def, pos: int, allowed: dict[str, tuple[int, int]], seen: list[App], allocs: list[App]) -> App | None:
    """Follow a token back through the allowed operations (annex → (depth, position of this token
    in its result)) to the `gpu.auto_init` it starts at."""
    while True:
        p = _proj(tok, "gpu.auto_init", 1)
        if p is not None:
            return p[0] if p[1] == pos else None
        for annex, (depth, at) in allowed.items():
            q = _proj(tok, annex, depth)
            if q is not None and q[1] == at:
                app = q[0]
                (allocs if annex == "gpu.alloc.block" else seen).insert(0, app)
                arg = app.arg
                tok = arg if annex == "gpu.alloc.block" else w_extract(arg, 3, pos)
                break
        else:
            return None


def w_extract(t: Def, n: int, i: int) -> Def:
    if isinstance(t, Tuple) and len(t.ops) == n:
        return t.ops[i]
    raise Refuted(f"an unexpected argument `{show(t)[:80]}` on the token chain")


def _after(w: World, ref: Ref, cont: MutLam, out: DevBuf, devs: list[DevBuf]) -> tuple[Def, Def]:
    """The launch's return continuation: copy back, frees, auto_deinit. Returns (the memory after
    auto_deinit, the result buffer)."""
    k = w.var(cont)
    k0, k1, k4 = (w.extract_n(k, 3, i) for i in range(3))
    body = cast(Def, cont.body)  # the caller refuted a continuation without one
    deinits = [d for d in walk(w, [body]) if isinstance(d, App) and app_parts(d, "gpu.auto_deinit", 1)
               and isinstance(d.arg, Tuple) and d.arg.ops[2] is k4]  # type: ignore[union-attr]
    if len(deinits) != 1:
        raise Refuted(f"the launch's continuation ends the GPU session {len(deinits)} times, not once")
    end = deinits[0]
    assert isinstance(end, App) and isinstance(end.arg, Tuple)
    t0, t1, _ = end.arg.ops
    # Host token: buffer.alloc, then the copy back.
    host_ops: list[App] = []
    while t0 is not k0:
        p = _proj(t0, "gpu.buf_copy_to_host", 2) or _proj(t0, "buffer.alloc", 2)
        if p is None or p[1] != 0:
            raise Refuted(f"`{show(t0)[:80]}` on the host token between the launch and `gpu.auto_deinit`")
        host_ops.insert(0, p[0])
        t0 = w_extract(p[0].arg, 4, 0) if app_parts(p[0], "gpu.buf_copy_to_host", 2) else p[0].arg
    # Device token: the copy back and the frees.
    dev_ops: list[App] = []
    while t1 is not k1:
        if app_parts(t1, "gpu.free.block", 2) is not None:
            assert isinstance(t1, App)
            dev_ops.insert(0, t1)
            t1 = w_extract(t1.arg, 2, 0)
            continue
        p = _proj(t1, "gpu.buf_copy_to_host", 2)
        if p is None or p[1] != 1:
            raise Refuted(f"`{show(t1)[:80]}` on the device token between the launch and `gpu.auto_deinit`")
        dev_ops.insert(0, p[0])
        t1 = w_extract(p[0].arg, 4, 1)
    copies = [a for a in dev_ops if app_parts(a, "gpu.buf_copy_to_host", 2)]
    back = [a for a in copies if w_extract(a.arg, 4, 2) is out.node]
    if not back or [a for a in host_ops if app_parts(a, "gpu.buf_copy_to_host", 2)] != back[:1] or len(copies) != 1:
        raise Refuted("the output is not copied back to the host (exactly once) before `gpu.auto_deinit`",
                      {"operation": str(ref.app.loc)})
    copy = back[0]
    shape, elem = _shape_of(w, app_parts(copy, "gpu.buf_copy_to_host", 2)[0])  # type: ignore[index]
    if shape != ref.so or not _same_type(elem, ref.tp):
        raise Refuted(f"the copy back moves a {tuple(shape)} array of `{show(elem)}`, not the result")
    result = w_extract(copy.arg, 4, 3)
    pa = _proj(result, "buffer.alloc", 2)
    if pa is None or pa[1] != 1 or pa[0] not in host_ops:
        raise Refuted("the output is copied into a buffer that is not freshly allocated")
    rst = app_parts(pa[0], "buffer.alloc", 2)[0]  # type: ignore[index]
    shape, elem = _shape_of(w, rst)
    if shape != ref.so or not _same_type(elem, ref.tp):
        raise Refuted(f"the result buffer has shape {tuple(shape)} of `{show(elem)}`, not {tuple(ref.so)} of `{show(ref.tp)}`")
    freed = [w_extract(a.arg, 2, 1) for a in dev_ops if app_parts(a, "gpu.free.block", 2)]
    for d in devs:
        if freed.count(d.node) != 1:
            raise Refuted(f"the device buffer `{show(d.node)[:60]}` is freed {freed.count(d.node)} times, not once")
    if dev_ops.index(copy) > next(i for i, a in enumerate(dev_ops) if app_parts(a, "gpu.free.block", 2)
                                  and w_extract(a.arg, 2, 1) is out.node):
        raise Refuted("the output is freed before it is copied back")
    return end, result


# ============================================================================ the kernel


@dataclass(frozen=True)
class Tok:
    space: int


@dataclass(frozen=True)
class Ptr:
    arg: int  # which launch argument
    path: tuple[int, ...]
    # the type of what it points to (the buffer's layout, then an element of it per `mem.lea`):
    # the code generators address memory by the types `mem.lea`/`mem.load`/`mem.store` name, so
    # those must be the layout's, not only the path of indices
    pointee: Def | None = field(default=None, compare=False)


@dataclass
class Clo:
    mut: MutLam
    frame: Frame


@dataclass
class Frame:
    mut: MutLam | None
    arg: Any
    parent: Frame | None
    memo: dict[int, Any] = field(default_factory=dict)


class KRet:
    """The kernel's return continuation."""


TYPE_HEADS = {"mem.M", "mem.Ptr", "buffer.Buf", "gpu.Stream"}


class Kernel:
    """Symbolic execution of the kernel for one (group, item)."""

    def __init__(self, w: World, ref: Ref, host: Host, mdl: Model, init: z3.ExprRef, same: Same) -> None:
        self.w, self.ref, self.host, self.mdl = w, ref, host, mdl
        self.steps = 0
        self.writes: dict[int, list[tuple[Any, int, int]]] = {}
        self.fn_cache: dict[int, str | None] = {}
        self.scopes = Scopes()
        self.inputs = ref.ins + ref.posts
        self.args: list[Any] = []
        for j, a in enumerate(host.args):
            if isinstance(a, DevBuf):
                self.args.append(Ptr(j, (), a.layout))
            elif same(ref.init, a):
                self.args.append(init)
            elif isinstance(a, Lit):
                self.args.append(int(a.value))
            else:
                self.args.append(z3.Const(f"host value {show(a)[:40]}", mdl.sorts.of(w.type_of(a))))
        self.group = self.item = 0

    # ------------------------------------------------------------------ driving

    def run_all(self) -> None:
        h = self.host
        kargs = tuple(self.args) if len(self.args) != 1 else self.args[0]
        for g in range(h.n_groups):
            for i in range(h.n_items):
                self.group, self.item = g, i
                self.run((Tok(1), Tok(3), Tok(4), Tok(5), g, i, (), kargs, KRet()))

    def run(self, arg: Any) -> None:
        callee: Any = Clo(self.host.kernel, Frame(None, None, None))
        while True:
            if isinstance(callee, KRet):
                return
            if not isinstance(callee, Clo):
                raise Unknown(f"a jump to {callee!r}")
            role = self.role(callee.mut)
            if role is not None:
                callee, arg = self.call_fn(role, arg)
                continue
            frame = Frame(callee.mut, arg, callee.frame)
            body = callee.mut.body
            if not isinstance(body, App):
                raise Unknown(f"`{callee.mut.name}` does not end in a jump")
            callee, arg = self.eval(body.callee, frame), self.eval(body.arg, frame)

    def role(self, m: MutLam) -> str | None:
        """Whether the continuation is (a structural copy of) the operation's `f` or `post`."""
        if m.gid not in self.fn_cache:
            role = None
            for name, fn in (("f", self.ref.f), ("post", self.ref.post)):
                if fn is not None and Matcher().run([(fn, m)]) is None:
                    role = name
                    break
            self.fn_cache[m.gid] = role
        return self.fn_cache[m.gid]

    def call_fn(self, role: str, arg: Any) -> tuple[Any, Any]:
        (_tok, acc, xs), k = arg
        ref = self.ref
        inputs = ref.ins if role == "f" else ref.posts
        fn = ref.f if role == "f" else ref.post
        decl = self.mdl.funs[fn.gid]  # type: ignore[union-attr]
        vals = [] if not inputs else ([xs] if len(inputs) == 1 else list(xs))
        if len(vals) != len(inputs):
            raise Refuted(f"`{role}` is called with {len(vals)} inputs, not {len(inputs)}")
        sorts = [decl.domain(i) for i in range(decl.arity())]
        res = decl(*[coerce(v, s) for v, s in zip([acc] + vals, sorts)])
        return k, (Tok(0), res)

    # ------------------------------------------------------------------ evaluation

    def closure(self, m: MutLam, frame: Frame) -> Clo:
        """A continuation closes over the activation of its innermost free mutable (its lexical
        scope), as the interpreter's closures do: a loop does not grow a chain of frames."""
        fv = self.scopes.free(m)
        f = frame
        while f.parent is not None and f.mut not in fv:
            f = f.parent
        return Clo(m, f)

    def lookup(self, d: Def, frame: Frame) -> tuple[bool, Any]:
        f: Frame | None = frame
        while f is not None:
            if d.gid in f.memo:
                return True, f.memo[d.gid]
            f = f.parent
        return False, None

    def eval(self, d: Def, frame: Frame) -> Any:
        found, v = self.lookup(d, frame)
        if found:
            return v
        # The one body schedule (verimim.ir.schedule), as the interpreter and the code generators
        # run the kernel: operands first, left to right.
        for x in schedule([d], lambda x: self.lookup(x, frame)[0], lambda x: self.eager_operands(x, frame)):
            self.steps += 1
            if self.steps > STEP_BOUND:
                raise Unknown(f"the kernel needs more than {STEP_BOUND} evaluation steps (the stated unrolling bound)")
            frame.memo[x.gid] = self.compute(x, frame)
        return frame.memo[d.gid]

    def eager_operands(self, d: Def, frame: Frame) -> list[Def]:
        """The operands `compute` evaluates first, in its order (a pack's elements are opened
        one by one, so it asks for them itself)."""
        if isinstance(d, Tuple):
            return list(d.ops)
        if isinstance(d, Extract):
            return [d.tup, d.index]
        if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex not in TYPE_HEADS:
            return d.args()
        return []

    def compute(self, d: Def, frame: Frame) -> Any:
        if isinstance(d, Lit):
            return int(d.value)
        if isinstance(d, Var):
            f: Frame | None = frame
            while f is not None and f.mut is not d.mut:
                f = f.parent
            if f is None:
                raise Unknown(f"the parameter of `{d.mut.name}` outside its scope")
            return f.arg
        if isinstance(d, MutLam):
            return self.closure(d, frame)
        if isinstance(d, Tuple):
            return tuple(self.eval(x, frame) for x in d.ops)
        if isinstance(d, Pack):
            if self.w.level(self.w.type_of(d)) >= 1:
                return d  # a tuple of types (`mem.lea`'s implicit `Ts`): nothing to evaluate
            if not isinstance(d.shape, Lit):
                raise Unknown("a pack of symbolic shape")
            n = int(d.shape.value)
            return tuple(self.eval(self.w.open(d.body, self.w.lit_idx(n, j)), frame) for j in range(n))
        if isinstance(d, Extract):
            t, i = self.eval(d.tup, frame), self.eval(d.index, frame)
            if isinstance(t, Def):
                return self.w.extract(t, d.index)
            if isinstance(t, tuple):
                return t[i]
            if i == 0:
                return t
            raise Unknown(f"extracting {i} from {t!r}")
        if isinstance(d, (Bot, Top)):
            return Tok(-1)
        if isinstance(d, (IdxT, NatT, Sigma, Arr, Pi, TypeU, Axiom)):
            return d
        if isinstance(d, App):
            return self.app(d, frame)
        raise Unknown(f"cannot evaluate `{show(d)[:60]}`")

    def app(self, d: App, frame: Frame) -> Any:
        head = d.head
        if not isinstance(head, Axiom):
            raise Unknown(f"a direct call `{show(d)[:60]}` inside the kernel")
        name = head.annex
        if name in TYPE_HEADS:
            return d
        args = [self.eval(a, frame) for a in d.args()]
        if name.startswith("core."):
            return self.core(name, args, d)
        if name == "mem.lea":
            implicit, (p, i) = args
            if not isinstance(p, Ptr) or not isinstance(i, int):
                raise Unknown("a symbolic address")
            return Ptr(p.arg, p.path + (i,), self.lea_type(p, implicit, d))
        if name == "mem.load":
            (t, _as), (m, p) = args
            self.access_type(p, t, "loads", d)
            return (m, self.load(p, d))
        if name == "mem.store":
            (t, _as), (m, p, v) = args
            self.access_type(p, t, "stores", d)
            self.store(p, v, d)
            return m
        raise Unknown(f"`{name}` inside the kernel")

    def core(self, name: str, args: list[Any], d: App) -> Any:
        op = name.split(".")
        if any(isinstance(a, z3.ExprRef) for a in _flat(args)):
            raise Unknown(f"`{name}` on symbolic data inside the kernel")
        if op[1] == "bitcast":
            _src, dst, x = args
            if isinstance(dst, IdxT) and isinstance(dst.size, Lit) and not 0 <= x < int(dst.size.value):
                raise Refuted(f"work-item ({self.group}, {self.item}) computes the index {x}, outside "
                              f"`{show(dst)}` ({self.where(d)})", {"group": self.group, "item": self.item, "index": x})
            return x
        if op[1] == "wrap":
            s, _mode, (a, b) = args
            return core_ops.wrap(op[2], s, a, b)
        if op[1] == "shr":
            s, (a, b) = args
            return core_ops.shr(op[2] == "a", s, a, b)
        if op[1] == "icmp":
            s, (a, b) = args
            return int(bool(core_ops.icmp(op[2], s, a, b)))
        if op[1] == "nat":
            (a, b), = args
            return core_ops.nat(op[2], a, b)
        if op[1] == "ncmp":
            (a, b), = args
            return int({"e": a == b, "ne": a != b, "l": a < b, "le": a <= b, "g": a > b, "ge": a >= b}[op[2]])
        if op[1] == "extrema":
            s, (a, b) = args
            return core_ops.extrema(op[2], s, a, b)
        if op[1] == "conv":
            ss, ds, x = args
            return core_ops.conv(op[2] == "s", ss, ds, x)
        raise Unknown(f"`{name}` inside the kernel")

    def lea_type(self, p: Ptr, implicit: Any, d: App) -> Def:
        """The element type a `mem.lea` reaches, after checking that the array type it names
        (`«n; Ts»`) is the one the pointer really points to: addresses are computed from it."""
        n, ts, _as = implicit
        have = p.pointee
        if not (isinstance(have, Arr) and isinstance(have.shape, Lit) and have.body.bvd == 0
                and n == int(have.shape.value) and isinstance(ts, Def)
                and _same_type(ts, self.w.pack(have.shape, have.body))):
            first = self.w.extract(ts, self.w.lit_idx(n, 0)) if isinstance(ts, Def) and isinstance(n, int) and n > 0 \
                else None
            named = f"«{n}; {show(first) if first is not None else '?'}»"
            raise Refuted(f"work-item ({self.group}, {self.item}) indexes `{show(have) if have is not None else '?'}` as "
                          f"`{named}` ({self.where(d)}): its addresses are not the buffer's",
                          {"group": self.group, "item": self.item, "path": list(p.path),
                           "buffer": show(have) if have is not None else None, "lea": named})
        return have.body

    def access_type(self, p: Any, t: Any, verb: str, d: App) -> None:
        """A `mem.load`/`mem.store` moves the type it names: it must be the element's."""
        if isinstance(p, Ptr) and not (isinstance(t, Def) and p.pointee is not None and _same_type(t, p.pointee)):
            raise Refuted(f"work-item ({self.group}, {self.item}) {verb} `{show(t) if isinstance(t, Def) else t}` "
                          f"where the buffer holds `{show(p.pointee) if p.pointee is not None else '?'}` "
                          f"({self.where(d)})", {"group": self.group, "item": self.item, "path": list(p.path)})

    def where(self, d: Def) -> str:
        return f"at {d.loc}" if d.loc else f"in the kernel `{self.host.kernel.name}` of the operation at {self.ref.app.loc}"

    # ------------------------------------------------------------------ memory

    def target(self, p: Any, d: App) -> tuple[DevBuf, int]:
        if not isinstance(p, Ptr):
            raise Unknown(f"an access through {p!r}")
        buf = self.host.args[p.arg]
        if not isinstance(buf, DevBuf):
            raise Unknown("an access through a pointer that is not a device buffer")
        shape = self.ref.so if buf.kind == "out" else buf.shape
        dims = [n for n in shape if n != 1]  # «1; T» = T: no index for those
        if len(p.path) != len(dims):
            raise Unknown(f"an access to a part of a buffer ({len(p.path)} of {len(dims)} indices)")
        for k, (i, n) in enumerate(zip(p.path, dims)):
            if not 0 <= i < n:
                raise Refuted(f"work-item ({self.group}, {self.item}) accesses index {i} of a dimension of size {n} "
                              f"({self.where(d)})", {"group": self.group, "item": self.item, "path": list(p.path)})
        return buf, linear(dims, list(p.path))

    def load(self, p: Any, d: App) -> Any:
        buf, k = self.target(p, d)
        if buf.kind == "out":
            raise Refuted(f"work-item ({self.group}, {self.item}) reads the output buffer ({self.where(d)})")
        inp = self.inputs[buf.inputs[0]]
        return self.mdl.arrays[inp.buf.gid][k]

    def store(self, p: Any, v: Any, d: App) -> None:
        buf, k = self.target(p, d)
        if buf.kind != "out":
            raise Refuted(f"work-item ({self.group}, {self.item}) writes into an input buffer ({self.where(d)})")
        self.writes.setdefault(k, []).append((v, self.group, self.item))


def _flat(xs: Any) -> list[Any]:
    if isinstance(xs, (list, tuple)):
        return [y for x in xs for y in _flat(x)]
    return [xs]


def _fn_effects(w: World, fn: Def | None, role: str) -> str | None:
    """Why calling `fn` with a token of the kernel's own is not equivalent (None: it is)."""
    if fn is None:
        return None
    if not isinstance(fn, MutLam) or fn.body is None:
        return f"`{role}` is not a function with a body"
    for d in walk(w, [fn]):
        if isinstance(d, MutLam) and d.body is None:
            return f"`{role}` reaches `{d.name}`, which has no body"
        if isinstance(d, Axiom) and apps_with_head(w.type_of(d), "mem.M"):
            return f"`{role}` performs memory operations (`{d.annex}`)"
    return None


def check_kernel(ctx: SpecContext, res: PhaseResult, ref: Ref, host: Host, index: int, same: Same) -> str:
    old, new = res.before.host, res.after.host
    for role, fn in (("f", ref.f), ("post", ref.post)):
        why = _fn_effects(old, fn, role)
        if why:
            raise Refuted(f"the kernel calls `{role}` with a memory token of its own, but {why}")
    mdl = Model(Sorts())
    init = coerce(int(ref.init.value), mdl.sorts.of(ref.to)) if isinstance(ref.init, Lit) \
        else z3.Const("init", mdl.sorts.of(ref.to))
    want = reference(ref, mdl, init)
    k = Kernel(new, ref, host, mdl, init, same)
    k.run_all()
    cells = [tuple(c) for c in itertools.product(*[range(d) for d in ref.so])]
    for c, o in enumerate(cells):
        got = k.writes.get(c, [])
        if not got:
            raise Refuted(f"output cell {o} is never written", {"cell": list(o)})
        if len(got) > 1:
            who = ", ".join(f"({g}, {i})" for _, g, i in got[:3])
            raise Refuted(f"output cell {o} is written {len(got)} times, by work-items {who}",
                          {"cell": list(o), "writers": [[g, i] for _, g, i in got]})
    sort = mdl.sorts.of(ref.tp)
    diffs = [coerce(k.writes[c][0][0], sort) != want[c] for c in range(len(cells))]
    s = ctx.solver()
    s.add(z3.Or(*diffs))
    r = ctx.check(s, f"{res.name}: op {index} at {ref.app.loc}: some cell differs from the fold")
    if r == z3.unsat:
        return f"{len(cells)} cells by {host.n_groups}×{host.n_items} work-items ({k.steps} steps)"
    if r == z3.unknown:
        raise Unknown(f"Z3 gave no answer within {ctx.timeout_ms} ms")
    model = s.model()
    c = next(c for c in range(len(cells)) if z3.is_true(model.eval(diffs[c], model_completion=True)))
    got_t, want_t = _text(z3.simplify(coerce(k.writes[c][0][0], sort))), _text(want[c])
    raise Refuted(f"output cell {cells[c]}: the kernel computes `{got_t}` but the map-reduce fold is `{want_t}`",
                  {"cell": list(cells[c]), "kernel": got_t, "map_reduce": want_t,
                   "model": str(model)[:2000]})


def _text(t: z3.ExprRef) -> str:
    return " ".join(str(t).split())  # Z3 wraps long terms over lines


# ============================================================================ the rest of the program


def check_rest(res: PhaseResult, done: dict[int, tuple[Def, Def]], jumps: dict[int, MutLam]) -> None:
    """Everything but the lowered operations is unchanged: `op#0` became the memory after
    `gpu.auto_deinit`, `op#1` the result buffer, and the owner continues after its launches."""
    results = lowered_rule(done)

    def rule(a: Def, b: Def) -> Pairs | None:
        if isinstance(a, MutLam) and isinstance(b, MutLam) and b.body is not None and b.body.gid in jumps:
            body: Def | None = b.body
            while body is not None and body.gid in jumps:
                body = jumps[body.gid].body
            return [(a.pi, b.pi), (a.body, body)] if a.body is not None and body is not None else None
        return results(a, b)

    mm = Matcher(rule).match_worlds(res.before.host, res.after.host)
    if mm is not None:
        raise Refuted(f"outside the lowered operations the program changed: {mm.describe()}",
                      {"location": str(mm.old.loc), "before": show(mm.old)[:300], "after": show(mm.new)[:300]})


# ============================================================================ the specification


def _left_without_a_reason(res: PhaseResult) -> App | None:
    """A full map-reduce application of the output that the phase neither lowered nor reports
    leaving (with its reason), if any."""
    said = {app.gid for app, _ in res.claim(BtensorLowering).not_lowered}
    for d in walk(res.after.host):
        if isinstance(d, App) and d.depth == 7 and isinstance(d.head, Axiom) \
                and d.head.annex in ("btensor.map_reduce_post", "btensor.map_reduce") and d.gid not in said:
            return d
    return None



@spec("gpu.lower_btensor_map_reduce")
def spec_lower_btensor(res: PhaseResult, ctx: SpecContext) -> Outcome:
    records = res.claim(BtensorLowering).lowered
    old, new = res.before.host, res.after.host
    unexplained = _left_without_a_reason(res)
    if unexplained is not None:
        return Outcome("refuted", f"the map-reduce at {unexplained.loc or '?'} is left on the host, and the phase "
                       f"does not say why (PHASES.md: an operation is left only for a stated reason)",
                       {"location": str(unexplained.loc)})
    if not records and res.after.host is res.before.host:
        left = res.claim(BtensorLowering).not_lowered
        why = "; ".join(f"{app.loc or '?'}: {reason}" for app, reason in left)
        return Outcome("proved", "no operation lowered; the program is unchanged" + (f"; left: {why}" if why else ""))
    done: dict[int, tuple[Def, Def]] = {}
    jumps: dict[int, MutLam] = {}
    details = []
    try:
        old_nodes = {d.gid for d in walk(old)}
        new_nodes = {d.gid for d in walk(new)}
        lowered = []
        for n, rec in enumerate(records):
            op, jump = rec.op, rec.launch
            if op.gid not in old_nodes or jump.gid not in new_nodes:
                raise Refuted(f"the logged operation {n} or its launch is not part of the program")
            ref = read_ref(old, op)
            host = host_side(old, new, ref, jump)
            done[op.gid] = (host.m0_end, host.result)
            jumps[jump.gid] = host.cont
            lowered.append((ref, host))
        same = Same(done)
        for n, (ref, host) in enumerate(lowered):
            match_inputs(ref, host, same)
            details.append(check_kernel(ctx, res, ref, host, n, same))
            check_config(ref, host)
        check_rest(res, done, jumps)
    except Refuted as e:
        return Outcome("refuted", e.detail, e.cex or None)
    except Unknown as e:
        return Outcome("unknown", str(e))
    if not details:
        return Outcome("proved", "no operation lowered; the rest of the program is unchanged")
    return Outcome("proved", f"{len(details)} operation(s) lowered; for all inputs and every `f`/`post` each cell "
                   f"equals the row-major fold: " + "; ".join(details) +
                   "; inputs copied, output copied back, every device buffer freed between auto_init and "
                   "auto_deinit; the rest of the program unchanged")
