"""Run-time semantics of the `btensor` plugin (PLUGINS.md "btensor"), on the host.

`btensor.map_reduce_post` allocates the output buffer (one host heap block, as `buffer.alloc`
does) and fills it cell by cell, output cells in row-major order: `acc = init`; for every
reduction point of the loop vector `v` (row-major over `Sr[Ro:]`), `acc = f (acc, ins)` with
`ins#i = is#i [v#(subs#i#0), …]`; then `out[o] = post (acc, (post_is#j [o#(post_subs#j#0), …])_j)`.
`btensor.map_reduce` is the same with `post` the identity. `f` and `post` are Mim functions
(`Fn [mem.M 0, …] → [mem.M 0, …]`): each call threads the memory token, so their effects happen
in fold order. Element reads go through `buffer.read`, so they are checked like any host access.

The fold order is the meaning (PLUGINS.md): nothing here reassociates, so a non-associative `f`
gives exactly the row-major result, which `gpu.lower_btensor_map_reduce` must reproduce.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from verimim.interp.values import Halt, RuntimeFault, Value
from verimim.ir.defs import App, Def
from verimim.plug import buffer_interp
from verimim.plug.mem_interp import loc_of

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


@dataclass
class Operand:
    """One input buffer of the fold: its `(r, s, T)`, its buffer value and the positions (of the
    loop vector for `is`, of the output cell for `post_is`) that index it."""

    rst: tuple[int, Value, Def]
    buf: Value
    positions: list[int]


def elems(m: Machine, v: Value, n: int) -> list[Value]:
    """The n elements of a run-time tuple of arity n (`«1; T»` is `T`, `«0; T»` is `()`); a
    type-level tuple is an IR node whose elements are extracted in the World."""
    if n == 0:
        return []
    if n == 1:
        return [v]
    if isinstance(v, tuple) and len(v) == n:
        return list(v)
    if isinstance(v, Def):
        w = m.world
        return [w.extract(v, w.lit_idx(n, i)) for i in range(n)]
    raise RuntimeFault("E-INTERNAL", f"expected a tuple of {n} elements, found {v!r}", None)


def call_fn(m: Machine, th: Thread, fn: Value, arg: Value, node: App | None) -> Value:
    """Call the Mim function `fn` (an `Fn`, a continuation taking `[arg, return]`) to its result,
    on a thread of its own that stops at the `Halt` continuation."""
    from verimim.interp.machine import Thread as MThread

    sub = MThread(f"{th.name}/btensor", th.device, th.group, th.item, th.launch)
    sub.next = (fn, (arg, Halt()))
    if m.run_thread(sub) != "done":
        raise RuntimeFault("E-UNSUPPORTED", "a barrier inside a function called by `btensor.map_reduce`",
                           loc_of(node))
    return sub.result


def _operands(m: Machine, n: int, ts: Value, rs: Value, ss: Value, bufs: Value, subs: Value,
              limit: int, what: str, node: App | None) -> list[Operand]:
    out = []
    for t, r, s, buf, sub in zip(elems(m, ts, n), elems(m, rs, n), elems(m, ss, n), elems(m, bufs, n),
                                 elems(m, subs, n)):
        positions = [int(p) for p in elems(m, sub, int(r))]
        for p in positions:
            if not 0 <= p < limit:
                raise RuntimeFault("E-OOB", f"`{what}` entry {p} is not a position below {limit}", loc_of(node))
        out.append(Operand((int(r), s, t), buf, positions))
    return out


def _read(m: Machine, th: Thread, mem: Value, op: Operand, vec: tuple[int, ...], node: App | None) -> tuple[Value, Value]:
    ix = tuple(vec[p] for p in op.positions)
    idx: Value = ix[0] if len(ix) == 1 else ix
    res = buffer_interp.read(m, th, [op.rst, (mem, op.buf, idx)], node)
    return res[0], res[1]


def _pack(values: list[Value]) -> Value:
    """The `«i: n; Tis#i»` argument: one value for n = 1, `()` for n = 0."""
    return values[0] if len(values) == 1 else tuple(values)


def fold(m: Machine, th: Thread, node: App | None, *, tp: Def, ro: int, rn: int, so: Value, sr: Value,
         f: Value, init: Value, post: Value | None, ins: list[Operand], posts: list[Operand],
         mem: Value) -> Value:
    shape_o = [int(x) for x in buffer_interp.dims(ro, so)]
    shape_r = [int(x) for x in buffer_interp.dims(rn, sr)]
    if shape_o != shape_r[:ro]:
        raise RuntimeFault("E-TYPE", f"the output shape {tuple(shape_o)} is not the first {ro} entries of the "
                           f"loop shape {tuple(shape_r)}", loc_of(node))
    mem, out = buffer_interp.alloc(m, th, [(ro, so, tp), mem], node)
    reduction = shape_r[ro:]
    for o in itertools.product(*[range(d) for d in shape_o]):
        acc = init
        for red in itertools.product(*[range(d) for d in reduction]):
            vec = o + red
            xs = []
            for op in ins:
                mem, x = _read(m, th, mem, op, vec, node)
                xs.append(x)
            mem, acc = call_fn(m, th, f, (mem, acc, _pack(xs)), node)
        if post is not None:
            ys = []
            for op in posts:
                mem, y = _read(m, th, mem, op, o, node)
                ys.append(y)
            mem, acc = call_fn(m, th, post, (mem, acc, _pack(ys)), node)
        idx: Value = o[0] if len(o) == 1 else o
        mem, out = buffer_interp.write(m, th, [(ro, so, tp), (mem, out, idx, acc)], node)
    return (mem, out)


def map_reduce_post(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    nn, (_to, tp, ro, rn), (so, sr), (tis, ris, sis, tps, rps, sps), (f, init, post), (subs, post_subs), \
        (mem, is_, post_is) = args
    nis, nps = (int(x) for x in elems(m, nn, 2))
    ins = _operands(m, nis, tis, ris, sis, is_, subs, int(rn), "subs", node)
    posts = _operands(m, nps, tps, rps, sps, post_is, post_subs, int(ro), "post_subs", node)
    return fold(m, th, node, tp=tp, ro=int(ro), rn=int(rn), so=so, sr=sr, f=f, init=init, post=post,
                ins=ins, posts=posts, mem=mem)


def map_reduce(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    nis, (to, ro, rn), (so, sr), (tis, ris, sis), (f, init), subs, (mem, is_) = args
    ins = _operands(m, int(nis), tis, ris, sis, is_, subs, int(rn), "subs", node)
    return fold(m, th, node, tp=to, ro=int(ro), rn=int(rn), so=so, sr=sr, f=f, init=init, post=None,
                ins=ins, posts=[], mem=mem)


def register(m: Machine) -> None:
    m.register("btensor.map_reduce_post", 7, map_reduce_post)
    m.register("btensor.map_reduce", 7, map_reduce)
