"""Run-time semantics of the `core` plugin for the reference interpreter.

Integer operations on `Idx s` bit patterns, with upstream MimIR's meaning: wrap-around
arithmetic modulo s, where the modes `nuw`/`nsw` make an overflow undefined (`E-OOB` here, as
for division by zero and shifts by the width or more); signedness belongs to the operation.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verimim.interp.values import RuntimeFault, Value
from verimim.ir.defs import App, Def, IdxT, Lit, NatT
from verimim.layout import X86_64, layout_of
from verimim.plug.core import _BIT2_TAGS, MODE_NSW, MODE_NUW, signed
from verimim.printer import show

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


def _size(s: Value, node: App | None) -> int:
    if isinstance(s, Lit):
        return s.value
    if isinstance(s, int):
        return s
    raise RuntimeFault("E-UNSUPPORTED", f"an integer width that is not known: {s!r}", node.loc if node else None)


def _ub(message: str, node: App | None) -> RuntimeFault:
    return RuntimeFault("E-OOB", message, node.loc if node else None)


def _wrap(name: str, op: Callable[[int, int], int]) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, mode, (a, b) = args
        s = _size(s_v, node)
        if name == "shl" and b >= max(s.bit_length() - 1, 1):
            raise _ub(f"`core.wrap.shl` by {b} bits, the width or more", node)
        exact = op(a, b)
        if mode & MODE_NUW and not 0 <= exact < s:
            raise _ub(f"`core.wrap.{name}` overflows with `nuw` (no unsigned wrap): {a}, {b}", node)
        if mode & MODE_NSW:
            sa, sb = signed(a, s), signed(b, s)
            exact_s = op(sa, sb) if name != "shl" else sa * (1 << b)
            if signed(exact % s, s) != exact_s:
                raise _ub(f"`core.wrap.{name}` overflows with `nsw` (no signed wrap): {sa}, {sb}", node)
        return exact % s
    return run


def _icmp(cmp: Callable[[int, int], bool], is_signed: bool) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (a, b) = args
        if is_signed:
            s = _size(s_v, node)
            a, b = signed(a, s), signed(b, s)
        return int(cmp(a, b))
    return run


def _div(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (mem, (a, b)) = args
        s = _size(s_v, node)
        if b == 0:
            raise _ub(f"`core.div.{name}` by zero", node)
        if name in ("udiv", "urem"):
            return (mem, a // b if name == "udiv" else a % b)
        sa, sb = signed(a, s), signed(b, s)
        q = abs(sa) // abs(sb) * (1 if (sa >= 0) == (sb >= 0) else -1)
        if not -((s + 1) // 2) <= q < (s + 1) // 2:
            raise _ub(f"`core.div.{name}` overflows: {sa} / {sb}", node)
        if name == "sdiv":
            return (mem, q % s)
        return (mem, (sa - q * sb) % s)
    return run


def _type_size(t: Def) -> int | None:
    if isinstance(t, NatT):
        return None
    if isinstance(t, IdxT) and isinstance(t.size, Lit):
        return t.size.value
    return -1


def bitcast(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    src_t, dst_t, x = args
    dst_n = _type_size(dst_t)
    if dst_n == -1 or _type_size(src_t) == -1:
        if src_t is dst_t:
            return x
        raise RuntimeFault("E-UNSUPPORTED", f"`core.bitcast` from `{show(src_t)}` to `{show(dst_t)}`",
                           node.loc if node else None)
    if dst_n is not None and x >= dst_n:
        raise _ub(f"`core.bitcast` of {x} to `{show(dst_t)}`, which does not hold it", node)
    return x


def _conv(sign: bool) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        ss_v, ds_v, x = args
        ss, ds = _size(ss_v, node), _size(ds_v, node)
        return (signed(x, ss) if sign else x) % ds
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
        bits = max(s.bit_length() - 1, 1)
        out = 0
        for k in range(bits):
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
        if b >= max(s.bit_length() - 1, 1):
            raise _ub(f"`core.shr` by {b} bits, the width or more", node)
        return (signed(a, s) >> b) % s if arith else a >> b
    return run


def _extrema(name: str) -> Callable[..., Value]:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        s_v, (a, b) = args
        s = _size(s_v, node)
        key = (lambda v: signed(v, s)) if name.startswith("s") else (lambda v: v)
        return min(a, b, key=key) if name.endswith("min") else max(a, b, key=key)
    return run


def idx(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    s_v, _mode, l = args
    s = _size(s_v, node)
    if l >= s:
        raise _ub(f"`core.idx` of {l} into `Idx {s}`", node)
    return l


def register(m: Machine) -> None:
    r = m.register
    nat: dict[str, Callable[[int, int], int]] = {
        "add": lambda a, b: a + b, "sub": lambda a, b: max(a - b, 0), "mul": lambda a, b: a * b}
    for name, fn in nat.items():
        r(f"core.nat.{name}", 1, lambda m_, th, args, node, fn=fn: fn(*args[0]))
    ncmp: dict[str, Callable[[int, int], bool]] = {
        "e": int.__eq__, "ne": int.__ne__, "l": int.__lt__, "le": int.__le__, "g": int.__gt__, "ge": int.__ge__}
    for name, c in ncmp.items():
        r(f"core.ncmp.{name}", 1, lambda m_, th, args, node, c=c: int(c(*args[0])))
    icmp = {"e": int.__eq__, "ne": int.__ne__, "ul": int.__lt__, "ule": int.__le__, "ug": int.__gt__,
            "uge": int.__ge__, "sl": int.__lt__, "sle": int.__le__, "sg": int.__gt__, "sge": int.__ge__}
    for name, c in icmp.items():
        r(f"core.icmp.{name}", 2, _icmp(c, name.startswith("s")))
    wrap: dict[str, Callable[[int, int], int]] = {
        "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "shl": lambda a, b: a << b}
    for name, op in wrap.items():
        r(f"core.wrap.{name}", 3, _wrap(name, op))
    for name in ("sdiv", "udiv", "srem", "urem"):
        r(f"core.div.{name}", 2, _div(name))
    r("core.bitcast", 3, bitcast)
    r("core.conv.s", 3, _conv(True))
    r("core.conv.u", 3, _conv(False))
    r("core.trait.size", 1, _trait("size"))
    r("core.trait.align", 1, _trait("align"))
    for i, tag in enumerate(_BIT2_TAGS):
        r(f"core.bit2.{tag}", 3, _bit2(i))
    for tag in ("f", "neg", "id", "t"):
        r(f"core.bit1.{tag}", 3, _bit1(tag))
    r("core.shr.a", 2, _shr(True))
    r("core.shr.l", 2, _shr(False))
    for name in ("umin", "umax", "smin", "smax"):
        r(f"core.extrema.{name}", 2, _extrema(name))
    r("core.idx", 3, idx)


__all__ = ["register", "Any"]
