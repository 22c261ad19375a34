"""Run-time semantics of the `core` plugin for the reference interpreter.

Integer operations on `Idx s` bit patterns, with upstream MimIR's meaning: wrap-around
arithmetic modulo s, where the modes `nuw`/`nsw` make an overflow undefined (`E-OOB` here, as
for division by zero and shifts by the width or more); signedness belongs to the operation.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from verimim.interp.memory import Ptr, address_of
from verimim.interp.values import Address, RuntimeFault, Value, bottom_used
from verimim.ir.defs import App, Axiom, Def, IdxT, Lit, NatT, Top
from verimim.layout import X86_64, layout_of, ptr_space
from verimim.plug import core_ops as ops
from verimim.plug.core import BIT2_TAGS, MODE_NSW, MODE_NUW
from verimim.printer import show

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


def _size(s: Value, node: App | None) -> int:
    """The modulus of an operation's `Idx s`; `Idx 0` has no values (LANGUAGE.md: I64 is
    `Idx 2^64`), so an operation that would produce one is undefined."""
    size = s.value if isinstance(s, Lit) else s
    if size == 0:
        name = node.head.annex if node is not None and isinstance(node.head, Axiom) else "an operation"
        raise _ub(f"`{name}` on or into `Idx 0`, a type without values (64-bit integers are `I64`, "
                  f"`Idx 2^64`)", node)
    if isinstance(size, int):
        return size
    name = node.head.annex if node is not None and isinstance(node.head, Axiom) else "an operation"
    shown = show(s) if isinstance(s, Def) else "⊤:Nat"  # (a value the interpreter has not got: `Idx ⊤:Nat`)
    raise RuntimeFault("E-UNSUPPORTED", f"`{name}` on an `Idx {shown}`, an integer whose width is not known "
                       f"(`core.idx_unsafe` gives `Idx ⊤:Nat`)", node.loc if node else None)


def _ub(message: str, node: App | None) -> RuntimeFault:
    return RuntimeFault("E-OOB", message, node.loc if node else None)


def _wrap(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, mode, (a, b) = args
        s = _size(s_v, node)
        if name == "shl" and b >= ops.width(s):
            raise _ub(f"`core.wrap.shl` by {b} bits, the width or more", node)
        if mode & MODE_NUW and ops.wrap_unsigned_overflow(name, s, a, b):
            raise _ub(f"`core.wrap.{name}` overflows with `nuw` (no unsigned wrap): {a}, {b}", node)
        if mode & MODE_NSW and ops.wrap_signed_overflow(name, s, a, b):
            raise _ub(f"`core.wrap.{name}` overflows with `nsw` (no signed wrap): "
                      f"{ops.signed(a, s)}, {ops.signed(b, s)}", node)
        return ops.wrap(name, s, a, b)
    return run


def _icmp(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (a, b) = args
        if a is None or b is None:  # (`==` on ⊥ would answer, not fail)
            raise bottom_used(f"`core.icmp.{name}`", node.loc if node else None)
        return int(ops.icmp(name, _size(s_v, node), a, b))
    return run


def _div(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (mem, (a, b)) = args
        s = _size(s_v, node)
        if not ops.div_defined(name, s, a, b):
            why = "by zero" if b == 0 else f"overflows: {ops.signed(a, s)} / {ops.signed(b, s)}"
            raise _ub(f"`core.div.{name}` {why}", node)
        return (mem, ops.div(name, s, a, b))
    return run


def _type_size(t: Def) -> int | None:
    """How many values an integer type holds: None for unboundedly many (`Nat`, and `Idx ⊤:Nat`,
    the index of an array of unknown length such as argv's), -1 for a type that is no integer."""
    if isinstance(t, NatT) or (isinstance(t, IdxT) and isinstance(t.size, Top)):
        return None
    if isinstance(t, IdxT) and isinstance(t.size, Lit):
        return t.size.value
    return -1


def bitcast(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    src_t, dst_t, x = args
    dst_n, src_n = _type_size(dst_t), _type_size(src_t)
    loc = node.loc if node else None
    if dst_n == -1 and src_n == -1 and (src_t is dst_t or _same_space_ptrs(src_t, dst_t)):
        return x  # a pointer cast to another pointee type keeps its block and offset
    dst_space, src_space = ptr_space(dst_t), ptr_space(src_t)
    if src_space is not None and isinstance(x, Ptr) and dst_n != -1:
        # ptrtoint: the address memory stores it as (NULL is 0); a type too narrow for it would
        # truncate it to bits no real run shares
        addr = 0 if x.block.kind == "null" else address_of(x)
        if dst_n is not None and addr >= dst_n:
            raise RuntimeFault("E-UNSUPPORTED", f"`core.bitcast` of a pointer to `{show(dst_t)}`, too narrow "
                               f"for the interpreter's addresses (64 bits)", loc)
        return Address(addr)  # (a stored address is named by what observes the heap, as a pointer is)
    if dst_space is not None and src_n != -1 and isinstance(x, int):
        p = m.memory.pointer_at(x, dst_space, "`core.bitcast` of the address", loc)  # inttoptr
        launch = getattr(th, "launch", None) if th is not None and th.device else None
        if launch is not None and p.block.owner is not None:
            # one address in every group or work-item (a kernel's shared or local block): the
            # instance this work-item has, as on a GPU
            p = Ptr(launch.instance(p.block, th.group, th.item), p.offset)
        return p
    if x is None and (src_n != -1 or src_space is not None):
        raise bottom_used("`core.bitcast`", loc)  # ⊥ of an integer or pointer type (to a pointer of its space: kept, above)
    if dst_n == -1 or src_n == -1 or not isinstance(x, int):
        raise RuntimeFault("E-UNSUPPORTED", f"`core.bitcast` from `{show(src_t)}` to `{show(dst_t)}`", loc)
    if dst_n is not None and x >= dst_n:
        raise _ub(f"`core.bitcast` of {x} to `{show(dst_t)}`, which does not hold it", node)
    return x


def _same_space_ptrs(a: Def, b: Def) -> bool:
    """Both `mem.Ptr (T, s)` types of one literal address space s."""
    sa = ptr_space(a)
    return sa is not None and sa == ptr_space(b)


def _conv(sign: bool) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        ss_v, ds_v, x = args
        return ops.conv(sign, _size(ss_v, node), _size(ds_v, node), x)
    return run


def _trait(which: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        (t,) = args
        lay = layout_of(t, X86_64)
        if lay is None:
            raise RuntimeFault("E-UNSUPPORTED", f"`core.trait.{which}` of `{show(t)}`", node.loc if node else None)
        return lay.size if which == "size" else lay.align
    return run


def _bit2(table: int) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, _mode, (a, b) = args
        s = _size(s_v, node)
        if a is None or b is None:  # (whether or not this operation reads both: as on a power of two)
            raise bottom_used(f"`core.bit2.{BIT2_TAGS[table]}`", node.loc if node else None)
        if s & (s - 1):
            return ops.bit2_not_pow2(BIT2_TAGS[table], s, a, b)
        out = 0
        for k in range(ops.width(s)):
            x, y = (a >> k) & 1, (b >> k) & 1
            out |= ((table >> (x << 1 | y)) & 1) << k
        return out % s
    return run


def _bit1(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, _mode, x = args
        s = _size(s_v, node)
        return {"f": 0, "t": s - 1, "id": x, "neg": (s - 1 - x)}[name]
    return run


def _shr(arith: bool) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (a, b) = args
        s = _size(s_v, node)
        if b >= ops.width(s):
            raise _ub(f"`core.shr` by {b} bits, the width or more", node)
        return ops.shr(arith, s, a, b)
    return run


def _extrema(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (a, b) = args
        return ops.extrema(name, _size(s_v, node), a, b)
    return run


def idx(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    """`core.idx s m l`: l, or l mod s in mode 0 (wrap allowed; upstream's normalize_idx), and
    undefined in any other mode."""
    s_v, mode, l = args
    s = _size(s_v, node)
    if l < s:
        return l
    if mode == 0 and s > 0:
        return l % s
    raise _ub(f"`core.idx` of {l} into `Idx {s}` in mode {mode} (no wrap-around)", node)


def register(m: Machine) -> None:
    r = m.register
    for name in ("add", "sub", "mul"):
        r(f"core.nat.{name}", 1, lambda m_, th, args, node, name=name: ops.nat(name, *args[0]))
    ncmp: dict[str, Callable[[int, int], bool]] = {
        "e": int.__eq__, "ne": int.__ne__, "l": int.__lt__, "le": int.__le__, "g": int.__gt__, "ge": int.__ge__}
    for name, c in ncmp.items():
        r(f"core.ncmp.{name}", 1, lambda m_, th, args, node, c=c: int(c(*args[0])))
    for name in ("e", "ne", "ul", "ule", "ug", "uge", "sl", "sle", "sg", "sge"):
        r(f"core.icmp.{name}", 2, _icmp(name))
    for name in ("add", "sub", "mul", "shl"):
        r(f"core.wrap.{name}", 3, _wrap(name))
    for name in ("sdiv", "udiv", "srem", "urem"):
        r(f"core.div.{name}", 2, _div(name))
    r("core.bitcast", 3, bitcast)
    r("core.conv.s", 3, _conv(True))
    r("core.conv.u", 3, _conv(False))
    r("core.trait.size", 1, _trait("size"))
    r("core.trait.align", 1, _trait("align"))
    for i, tag in enumerate(BIT2_TAGS):
        r(f"core.bit2.{tag}", 3, _bit2(i))
    for tag in ("f", "neg", "id", "t"):
        r(f"core.bit1.{tag}", 3, _bit1(tag))
    r("core.shr.a", 2, _shr(True))
    r("core.shr.l", 2, _shr(False))
    for name in ("umin", "umax", "smin", "smax"):
        r(f"core.extrema.{name}", 2, _extrema(name))
    r("core.idx", 3, idx)
    r("core.idx_unsafe", 1, lambda m, th, args, node: args[0])

