"""Run-time semantics of the C functions a program declares (`ccon` / `cfun`).

A C call is a jump to the axiom `c.NAME` (verimim.plug.c_lib); the interpreter runs the
function's semantics from `SEMANTICS` and continues at the call's continuation. Every byte a C
function reads goes through the same checks as a `mem.load` (verimim.plug.mem_interp.access:
address space, use after free, bounds, pending GPU copies) and must have been written
(`E-UNINIT`): a string without its NUL inside its allocation is `E-OOB`. `malloc`/`free` are
the interpreter's heap (leaks, double frees, bad frees reported as for `mem.malloc`). What a
program prints is appended to `Machine.stdout`.
"""
from __future__ import annotations

import struct
import time as clock
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from verimim.diagnostics import Loc, Related, VerimimError
from verimim.interp import entry
from verimim.interp.memory import Ptr
from verimim.interp.values import RuntimeFault, Value, bottom_used
from verimim.ir.defs import App, Axiom
from verimim.plug import c_format, mem_interp
from verimim.plug.c_lib import CCall, CInt, c_call, c_name, signed, widen

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


@dataclass
class Call:
    """One C call being run: the machine, the calling thread, the call site, the declaration."""

    m: Machine
    th: Thread
    site: App | None
    decl: CCall

    @property
    def loc(self) -> Loc | None:
        return self.site.loc if self.site is not None else None

    @property
    def name(self) -> str:
        return self.decl.proto.name

    def fault(self, code: str, message: str) -> RuntimeFault:
        return RuntimeFault(code, f"`{self.name}`: {message}", self.loc,
                            (Related("declared here", self.decl.axiom.loc),))

    def write(self, data: bytes) -> None:
        self.m.stdout += data

    def _pointer(self, p: Value, what: str) -> Ptr:
        if not isinstance(p, Ptr):
            raise self.fault("E-OOB", f"{what} is a pointer that points nowhere ({p!r})")
        return p

    def byte(self, ptr: Ptr, i: int, what: str) -> int:
        """The byte at offset i of ptr's block, which a C function reads: inside the block and
        written."""
        b = ptr.block
        if not b.live or b.kind == "null":
            try:
                self.m.memory.check(Ptr(b, i), 1, self.loc, f"{what}: reading")
            except RuntimeFault as e:
                raise RuntimeFault(e.code, f"`{self.name}`: {e.message}", self.loc, e.related) from None
        if i >= b.size:
            raise self.fault("E-OOB", f"{what}: reading byte {i} of the {b.describe()}, past its end: "
                             f"the string has no terminating NUL inside its allocation")
        if not b.init[i]:
            raise self.fault("E-UNINIT", f"{what}: reading byte {i} of the {b.describe()}, which was "
                             f"never written (no NUL before it)")
        return b.data[i]

    def scan(self, p: Value, what: str, more: Callable[[int], bool], limit: int | None = None) -> bytes:
        """Read bytes from p one by one, as C does, while `more(byte)` (at most `limit`); every
        byte read (the one that stops the scan included) is checked like a load."""
        ptr = self._pointer(p, what)
        mem_interp.check_space(self.th, ptr, self.site, "reads")
        self.m.memory.check(ptr, 0, self.loc, "reading")  # freed blocks, negative offsets
        out = bytearray()
        read = 0
        try:
            while limit is None or read < limit:
                c = self.byte(ptr, ptr.offset + read, what)
                read += 1
                if not more(c):
                    break
                out.append(c)
        except RuntimeFault:
            if read:  # the bytes before the faulting one were read first: a conflict there comes first
                mem_interp.access(self.m, self.th, ptr, read, None, self.site)
            raise
        if read:
            # The same checks as a load of those bytes: conflicts with pending GPU copies.
            mem_interp.access(self.m, self.th, ptr, read, None, self.site)
        return bytes(out)

    def cstring(self, p: Value, what: str, limit: int | None = None) -> bytes:
        """The C string at p, up to its NUL; with `limit`, at most that many bytes (`%.3s`
        needs no NUL after them)."""
        return self.scan(p, what, lambda c: c != 0, limit)

    def load(self, p: Value, size: int, what: str) -> bytes:
        """`size` bytes at p, checked like a `mem.load`."""
        ptr = self._pointer(p, what)
        mem_interp.access(self.m, self.th, ptr, size, None, self.site)
        return self.m.memory.read_bytes(ptr, size, self.loc)

    def ints(self, p: Value, n: int, what: str) -> list[int]:
        raw = self.load(p, 4 * n, what) if n > 0 else b""
        return [int.from_bytes(raw[4 * j:4 * j + 4], "little", signed=True) for j in range(n)]


Semantics = Callable[[Call, list[Value]], Value]


def _signed(v: int) -> int:
    return signed(v, 32)


def _atoi(c: Call, a: list[Value]) -> Value:
    """glibc's atoi, `(int) strtol(s, NULL, 10)`: reads white space, a sign and digits, up to
    the first byte that ends the number (the string need not end there)."""
    state = {"phase": 0}  # 0: leading white space, 1: after the sign, 2: in the digits

    def more(ch: int) -> bool:
        if state["phase"] == 0 and ch in b" \t\n\v\f\r":
            return True
        if state["phase"] == 0 and ch in b"+-":
            state["phase"] = 1
            return True
        state["phase"] = 2
        return 48 <= ch <= 57

    s = c.scan(a[0], "the string", more)
    s = s.lstrip(b" \t\n\v\f\r")
    neg = s[:1] == b"-"
    digits = s.lstrip(b"+-").lstrip(b"0")
    # strtol saturates at LONG_MIN/LONG_MAX (more than 19 digits always does: no huge int parsed)
    v = int(digits) if 0 < len(digits) <= 19 else (1 << 63 if digits else 0)
    v = max(-(1 << 63), min((1 << 63) - 1, -v if neg else v))
    return v % (1 << 32)


def _strlen(c: Call, a: list[Value]) -> Value:
    return len(c.cstring(a[0], "the string"))


def _puts(c: Call, a: list[Value]) -> Value:
    s = c.cstring(a[0], "the string")
    c.write(s + b"\n")
    return len(s) + 1  # glibc's puts returns the number of bytes written


def _putchar(c: Call, a: list[Value]) -> Value:
    ch = a[0] & 0xFF
    c.write(bytes([ch]))
    return ch


def _printf(c: Call, a: list[Value]) -> Value:
    fmt = c.cstring(a[0], "the format")
    extra = list(zip(c.decl.extra, a[1:]))
    try:
        out = c_format.render(fmt, extra, lambda p, limit, what: c.cstring(p, f"the argument of {what}", limit))
    except c_format.FormatError as e:
        raise c.fault(e.code, e.message) from None
    c.write(out)
    return len(out)


MAX_MALLOC = 1 << 30  # bytes the interpreter backs with real memory in one allocation


def _malloc(c: Call, a: list[Value]) -> Value:
    if a[0] > MAX_MALLOC:
        # C's malloc may return NULL here, or succeed: the interpreter models neither honestly.
        raise c.fault("E-UNSUPPORTED", f"an allocation of {a[0]} bytes, more than the interpreter "
                      f"holds in one block ({MAX_MALLOC})")
    block = c.m.memory.alloc(0, a[0], "heap", c.loc, _label(c, "malloc"))
    return Ptr(block, 0)


def _free(c: Call, a: list[Value]) -> Value:
    p = a[0]
    if p is None or p == 0:
        return None  # free(NULL) does nothing
    if not isinstance(p, Ptr):
        raise c.fault("E-BAD-FREE", f"freeing {p!r}, which is not a pointer")
    mem_interp.check_space(c.th, p, c.site, "frees")
    mem_interp.release(c.m, c.th, p, c.site, "the C function `free`")
    c.m.memory.free(p, c.loc)
    return None


def _label(c: Call, what: str) -> str:
    loc = c.loc
    return f"{what}@{loc.line}:{loc.col}" if loc and loc.line else what


def _printer(fmt: Callable[[int], bytes]) -> Semantics:
    def run(c: Call, a: list[Value]) -> Value:
        c.write(fmt(a[0]))
        return None
    return run


def _char(v: int) -> bytes:
    return bytes([v & 0xFF])


def _print_str(newline: bool) -> Semantics:
    def run(c: Call, a: list[Value]) -> Value:
        c.write(c.cstring(a[0], "the string") + (b"\n" if newline else b""))
        return None
    return run


def _print_int_vector(c: Call, a: list[Value]) -> Value:
    n = _signed(a[0])
    c.write(b"".join(b"%d, " % v for v in c.ints(a[1], n, "the vector")) + b"\n")
    return None


def _print_int_matrix(c: Call, a: list[Value]) -> Value:
    n, m = _signed(a[0]), _signed(a[1])
    vals = c.ints(a[2], n * m if n > 0 and m > 0 else 0, "the matrix")
    rows = [vals[i * m:(i + 1) * m] for i in range(max(n, 0))]
    c.write(b"".join(b"".join(b"%d, " % v for v in row) + b"\n" for row in rows))
    return None


TIMEVAL = struct.Struct("<qq")  # struct timeval on x86-64 Linux: tv_sec, tv_usec


def _time(c: Call, a: list[Value]) -> Value:
    """lib.c's `time()`: a malloc'd `struct timeval` filled by gettimeofday (never freed there)."""
    block = c.m.memory.alloc(0, TIMEVAL.size, "heap", c.loc, _label(c, "time"))
    now = clock.time_ns() // 1000
    c.m.memory.write_bytes(Ptr(block, 0), TIMEVAL.pack(now // 1_000_000, now % 1_000_000), c.loc)
    c.m.state["c.nondeterministic"] = "it prints times (`time`)"
    c.m.state.setdefault("c.clock_blocks", set()).add(block.id)  # bytes from the clock: not compared
    return Ptr(block, 0)


def _print_time_diff(c: Call, a: list[Value]) -> Value:
    s1, u1 = TIMEVAL.unpack(c.load(a[0], TIMEVAL.size, "the first time"))
    s2, u2 = TIMEVAL.unpack(c.load(a[1], TIMEVAL.size, "the second time"))
    # lib.c's tdiff computes in double and returns a float, which printf promotes back
    diff = struct.unpack("<f", struct.pack("<f", (s2 - s1) + 1e-6 * (u2 - u1)))[0]
    c.write(b"real\t%0.6f \n" % diff)
    return None


SEMANTICS: dict[str, Semantics] = {
    "atoi": _atoi,
    "strlen": _strlen,
    "puts": _puts,
    "putchar": _putchar,
    "printf": _printf,
    "malloc": _malloc,
    "free": _free,
    "print_char": _printer(_char),
    "println_char": _printer(lambda v: _char(v) + b"\n"),
    "print_str": _print_str(False),
    "println_str": _print_str(True),
    "print_i32": _printer(lambda v: b"%d" % _signed(v)),
    "println_i32": _printer(lambda v: b"%d\n" % _signed(v)),
    "newline": lambda c, a: c.write(b"\n"),
    "print_integer": _printer(lambda v: b"%d, " % _signed(v)),
    "print_int_newline": _printer(lambda v: b"%d\n" % _signed(v)),
    "print_newline": lambda c, a: c.write(b"\n"),
    "print_int_vector": _print_int_vector,
    "print_int_matrix": _print_int_matrix,
    "time": _time,
    "print_time_diff": _print_time_diff,
}


# ----------------------------------------------------------------------------- the call


def declaration(m: Machine, ax: Axiom, site: App | None) -> CCall:
    cache: dict[int, CCall] = m.state.setdefault("c.decls", {})
    hit = cache.get(ax.gid)
    if hit is None:
        try:
            hit = c_call(ax, site.loc if site is not None else None)
        except VerimimError as e:
            raise RuntimeFault(e.code, e.message, e.loc, e.related) from None
        cache[ax.gid] = hit
    return hit


def jump(m: Machine, th: Thread, ax: Axiom, arg: Value, site: App | None) -> tuple[Value, Value]:
    """Run the C function `ax` on the jump's argument; returns (continuation, its argument)."""
    if th.device:
        raise RuntimeFault("E-UNSUPPORTED", f"a call of the C function `{c_name(ax)}` in a kernel (C functions "
                           f"run on the host)", site.loc if site is not None else None,
                           (Related("declared here", ax.loc),))
    decl = declaration(m, ax, site)
    if decl.arg_types:
        *parts, k = arg
    else:
        parts, k = [], arg
    leaves: list[Value] = []
    for t, v in zip(decl.arg_types, parts):
        entry.flatten(t, v, leaves)
    if any(v is None for v in leaves):  # ⊥ passed to C: computing with it (docs/semantics.md)
        raise bottom_used(f"the call of the C function `{c_name(ax)}`", site.loc if site is not None else None)
    args: list[Value] = []
    for j, v in enumerate(leaves):
        ct = decl.proto.params[j] if j < len(decl.proto.params) else None
        if isinstance(ct, CInt):
            v = widen(v, decl.arg_leaves[j].bits, ct)
        args.append(v)
    result = SEMANTICS[decl.proto.name](Call(m, th, site, decl), args)
    out = decl.ret_leaf
    if out is not None and out.kind == "int":
        result %= 1 << out.bits  # the declared width: the low bits of C's result
    return k, entry.build(decl.ret_type, iter([result]))
