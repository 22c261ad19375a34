"""Run-time semantics of the `buffer` plugin, and of the gpu plugin's `buf_*` operations.

A `buffer.Buf (r, s, T)` is, at run time, a host heap block holding the row-major array
`«s; T»` — what `buffer.lower_ptr` turns it into (`mem.Ptr («s; T», 0)`): the value is a pointer
to that block. Element accesses are checked like every host access (verimim.plug.mem_interp).
`gpu.buf_alloc_copy` / `gpu.buf_copy_to_host` are `gpu.alloc.block` + `gpu.copy_to_device.block`
and `gpu.copy_to_host.block` on the whole array, run through the machine's registered
semantics, so that a GPU backend installed on the machine sees them too.
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from verimim.interp.memory import Ptr
from verimim.interp.values import RuntimeFault, Value
from verimim.ir.defs import App, Def
from verimim.plug.mem_interp import access, loc_of

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


def dims(r: Value, s: Value) -> list[int]:
    """The shape as a list: `s` is one Nat for rank 1 (`«1; Nat»` is `Nat`), else a tuple."""
    if isinstance(s, tuple):
        return [int(x) for x in s]
    return [int(s)] if int(r) == 1 else [int(s)] * int(r)


def array_type(m: Machine, shape: list[int], t: Def) -> Def:
    w = m.world
    out = t
    for d in reversed(shape):
        out = w.arr(w.lit_nat(d), out)
    return out


def linear(shape: list[int], idx: Value, node: App | None) -> int:
    ix = list(idx) if isinstance(idx, tuple) else [idx]
    if len(ix) != len(shape):
        raise RuntimeFault("E-OOB", f"an index of rank {len(ix)} into a buffer of rank {len(shape)}", loc_of(node))
    k = 0
    for i, d in zip(ix, shape):
        if not 0 <= i < d:
            raise RuntimeFault("E-OOB", f"buffer index {tuple(ix)} outside the shape {tuple(shape)}", loc_of(node))
        k = k * d + i
    return k


def _element(m: Machine, th: Thread, rst: Value, buf: Value, idx: Value, node: App | None) -> tuple[Ptr, Def, int]:
    r, s, t = rst
    shape = dims(r, s)
    if not isinstance(buf, Ptr):
        raise RuntimeFault("E-UNINIT", "a buffer that was never allocated", loc_of(node))
    size = m.memory.layout(t, loc_of(node)).size
    return Ptr(buf.block, buf.offset + linear(shape, idx, node) * size), t, size


def alloc(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, t), mem = args
    at = array_type(m, dims(r, s), t)
    block = m.memory.alloc(0, m.memory.layout(at, loc_of(node)).size, "heap", loc_of(node), "buffer")
    return (mem, Ptr(block, 0))


def read(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    rst, (mem, buf, idx) = args
    p, t, size = _element(m, th, rst, buf, idx, node)
    access(m, th, p, size, None, node)
    raw = m.memory.read_bytes(p, size, loc_of(node), m.memory.value_mask(t))
    return (mem, m.memory.decode(t, raw, loc_of(node)))


def write(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    rst, (mem, buf, idx, val) = args
    p, t, size = _element(m, th, rst, buf, idx, node)
    data, pointers = m.memory.encode_marked(t, val, loc_of(node))
    access(m, th, p, size, data, node)
    m.memory.write_bytes(p, data, loc_of(node), pointers, m.memory.value_mask(t))
    return (mem, buf)


def init(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, t), (mem, val) = args
    mem, buf = alloc(m, th, [(r, s, t), mem], node)
    at = array_type(m, dims(r, s), t)
    data, pointers = m.memory.encode_marked(at, val, loc_of(node))
    access(m, th, buf, len(data), data, node)
    m.memory.write_bytes(buf, data, loc_of(node), pointers, m.memory.value_mask(at))
    return (mem, buf)


def lit(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, t), (mem, v) = args
    mem, buf = alloc(m, th, [(r, s, t), mem], node)
    one, marks = m.memory.encode_marked(t, v, loc_of(node))
    n = prod(dims(r, s))
    data = one * n
    access(m, th, buf, len(data), data, node)
    mask = m.memory.value_mask(t)
    m.memory.write_bytes(buf, data, loc_of(node), tuple(j * len(one) + k for j in range(n) for k in marks),
                         None if mask is None else mask * n)
    return (mem, buf)


def shape(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, _t), (_buf, i) = args
    return dims(r, s)[i]


def copy(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, t), (mem, dst, src) = args
    return _copy_bytes(m, th, array_type(m, dims(r, s), t), mem, dst, src, node)


def ptr_copy(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    """`buffer.ptr_copy @T (m, dst, src)`, what buffer.lower_ptr makes of `copy`: the same copy."""
    t, (mem, dst, src) = args
    return _copy_bytes(m, th, t, mem, dst, src, node)


def _copy_bytes(m: Machine, th: Thread, t: Def, mem: Value, dst: Value, src: Value, node: App | None) -> Value:
    """The bytes of a `t` at src, with their "initialised" shadow, into dst (SEMANTICS.md: copies
    move the shadow with the bytes; only a load of unwritten bytes is E-UNINIT)."""
    size = m.memory.layout(t, loc_of(node)).size
    access(m, th, src, size, None, node)
    access(m, th, dst, size, bytes(size), node)
    m.memory.copy(dst, src, size, loc_of(node))
    return mem


def buf_alloc_copy(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, t), (m0, m1, buf) = args
    at = array_type(m, dims(r, s), t)
    m1, dptr = m.semantics["gpu.alloc.block"][1](m, th, [at, m1], node)
    m0, m1 = m.semantics["gpu.copy_to_device.block"][1](m, th, [at, (m0, m1, buf, dptr)], node)
    return (m0, m1, dptr)


def buf_copy_to_host(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (r, s, t), (m0, m1, dptr, buf) = args
    at = array_type(m, dims(r, s), t)
    return m.semantics["gpu.copy_to_host.block"][1](m, th, [at, (m0, m1, dptr, buf)], node)


def register(m: Machine) -> None:
    r = m.register
    for name, fn in (("alloc", alloc), ("read", read), ("write", write), ("init", init), ("lit", lit),
                     ("shape", shape), ("copy", copy)):
        r(f"buffer.{name}", 2, fn)
    r("buffer.ptr_copy", 2, ptr_copy)
    r("gpu.buf_alloc_copy", 2, buf_alloc_copy)
    r("gpu.buf_copy_to_host", 2, buf_copy_to_host)
