"""C functions a program declares (`ccon` / `cfun`): the prototypes verimim knows, and how a
declaration's Mim type maps onto one.

A declaration `ccon f [D]` is the axiom `c.f : Cn D`, `cfun f [D]: R` is `c.f : Cn [D, Cn R]`
(the frontend's contract). Like upstream's LLVM emitter, memory tokens are dropped: the data
leaves of everything but the final continuation are the C arguments, and the data leaf of the
continuation's domain (at most one) is the C return value. Both the interpreter
(verimim.plug.c_interp) and compiled host code (verimim.runtime.host) go through `c_call`, so
they accept exactly the same declarations and convert integers the same way.

A declaration that does not fit the C prototype (a pointer where C takes an `int`, an `I64`
where C takes an `int`) would be undefined behaviour when linked: it is `E-TYPE` at the
declaration. An integer narrower than C's parameter is widened the way C's own conversion of a
signed value would (sign extension; `Bool` zero-extends); a return value is truncated to the
declared width (what reading the low bits of the C result gives).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from verimim.diagnostics import Loc, Related, VerimimError
from verimim.ir.defs import App, Arr, Axiom, Bot, Def, IdxT, Lit, NatT, Pi, Sigma
from verimim.printer import show

C_PREFIX = "c."


@dataclass(frozen=True)
class CInt:
    bits: int
    signed: bool

    def __str__(self) -> str:
        return {(8, True): "char", (32, True): "int", (64, False): "size_t", (64, True): "long"}.get(
            (self.bits, self.signed), f"{'' if self.signed else 'u'}int{self.bits}_t")


@dataclass(frozen=True)
class CPtr:
    def __str__(self) -> str:
        return "void*"


CType = CInt | CPtr
INT, CHAR, SIZE, PTR = CInt(32, True), CInt(8, True), CInt(64, False), CPtr()


@dataclass(frozen=True)
class CProto:
    """A C prototype; `lib` is where the function comes from ("libc", or "lib.c": upstream's
    `lit/lib.c` helpers, which verimim provides itself)."""

    name: str
    params: tuple[CType, ...]
    ret: CType | None
    lib: str
    variadic: bool = False
    # Reads at least the first byte its first pointer argument points to, whatever the memory
    # holds: a string it scans (verimim.plug.c_interp), printf's format. The kernel verifier's
    # host model (verimim.smt.kernel_streams) decides that byte exactly.
    reads_first_byte: bool = False
    # Ends the block its first pointer argument points to (`free`): a conflict with pending GPU
    # work on that block, as a write of every byte (verimim.plug.mem_interp.release).
    frees_first: bool = False

    def __str__(self) -> str:
        ps = [str(p) for p in self.params] + (["..."] if self.variadic else [])
        return f"{self.ret or 'void'} {self.name}({', '.join(ps) or 'void'})"


def _protos(*ps: CProto) -> dict[str, CProto]:
    return {p.name: p for p in ps}


PROTOS: dict[str, CProto] = _protos(
    # libc
    CProto("atoi", (PTR,), INT, "libc", reads_first_byte=True),
    CProto("strlen", (PTR,), SIZE, "libc", reads_first_byte=True),
    CProto("puts", (PTR,), INT, "libc", reads_first_byte=True),
    CProto("putchar", (INT,), INT, "libc"),
    CProto("printf", (PTR,), INT, "libc", variadic=True, reads_first_byte=True),
    CProto("malloc", (SIZE,), PTR, "libc"),
    CProto("free", (PTR,), None, "libc", frees_first=True),
    # upstream's lit/lib.c
    CProto("print_char", (CHAR,), None, "lib.c"),
    CProto("println_char", (CHAR,), None, "lib.c"),
    CProto("print_str", (PTR,), None, "lib.c", reads_first_byte=True),
    CProto("println_str", (PTR,), None, "lib.c", reads_first_byte=True),
    CProto("print_i32", (INT,), None, "lib.c"),
    CProto("println_i32", (INT,), None, "lib.c"),
    CProto("newline", (), None, "lib.c"),
    CProto("print_integer", (INT,), None, "lib.c"),
    CProto("print_int_newline", (INT,), None, "lib.c"),
    CProto("print_newline", (), None, "lib.c"),
    CProto("print_int_vector", (INT, PTR), None, "lib.c"),
    CProto("print_int_matrix", (INT, INT, PTR), None, "lib.c"),
    CProto("time", (), PTR, "lib.c"),
    CProto("print_time_diff", (PTR, PTR), None, "lib.c"),
)


@dataclass(frozen=True)
class Leaf:
    """A data leaf of a declared Mim type: an integer of `bits` bits (`Bool`: 1) or a pointer
    (`space`: its address space)."""

    kind: str  # "int" | "ptr"
    bits: int = 64
    space: int = 0
    nat: bool = False  # a `Nat` (64 bits, as an I64 is): the messages name which

    def __str__(self) -> str:
        if self.kind == "ptr":
            return "a pointer"
        return "Bool" if self.bits == 1 else ("Nat" if self.nat else f"I{self.bits}")


@dataclass(frozen=True)
class CCall:
    """A declaration matched against its prototype. `arg_types` are the types of the call's
    argument components before the continuation (flattened in `arg_leaves`), `ret_type` the
    continuation's domain; `extra` counts the variadic arguments."""

    proto: CProto
    axiom: Axiom
    arg_types: tuple[Def, ...]
    arg_leaves: tuple[Leaf, ...]
    ret_type: Def
    ret_leaf: Leaf | None

    @property
    def extra(self) -> tuple[Leaf, ...]:
        return self.arg_leaves[len(self.proto.params):]


def c_name(d: Def) -> str | None:
    """The C name of a C-function axiom, else None."""
    if isinstance(d, Axiom) and d.annex.startswith(C_PREFIX):
        return d.annex[len(C_PREFIX):]
    return None


def unsupported(name: str, ax: Axiom, site: Loc | None) -> VerimimError:
    known = ", ".join(sorted(PROTOS))
    return VerimimError("E-UNSUPPORTED", f"the C function `{name}` is not one verimim knows the "
                        f"semantics of (known: {known})", ax.loc,
                        (Related("called here", site),) if site is not None else ())


def _mismatch(ax: Axiom, what: str, proto: CProto, site: Loc | None) -> VerimimError:
    related = [Related(f"C declares `{proto}`", None)]
    if site is not None:
        related.append(Related("called here", site))
    return VerimimError("E-TYPE", f"the declaration of `{proto.name}` does not fit C's prototype: "
                        f"{what}", ax.loc, tuple(related))


def type_leaves(t: Def) -> list[Leaf] | None:
    """The data leaves of a declared type (memory tokens have none); None: not a C type."""
    if isinstance(t, NatT):
        return [Leaf("int", 64, nat=True)]
    if isinstance(t, IdxT):
        if not isinstance(t.size, Lit):
            return None
        n = t.size.value
        bits = n.bit_length() - 1
        if bits not in (1, 8, 16, 32, 64) or n != 1 << bits:  # (`Idx 0`: bits is -1)
            return None
        return [Leaf("int", bits)]
    if isinstance(t, App) and isinstance(t.head, Axiom):
        if t.head.annex == "mem.M":
            return []
        if t.head.annex == "mem.Ptr":
            a = t.arg
            space = a.ops[1] if a.ops else None
            return [Leaf("ptr", 64, space.value if isinstance(space, Lit) else 0)]
    if isinstance(t, Sigma):
        out: list[Leaf] = []
        for f in t.ops:
            if f.bvd:
                return None  # a dependent field: no C type
            sub = type_leaves(f)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(t, Arr) and isinstance(t.shape, Lit) and not t.body.bvd:
        sub = type_leaves(t.body)
        return None if sub is None else sub * t.shape.value
    return None


def split_cn(pi: Def) -> tuple[tuple[Def, ...], Def] | None:
    """`Cn [A…, Cn R]` → ((A…), R); None when `pi` is not of that form."""
    if not isinstance(pi, Pi):
        return None
    dom = pi.dom
    fields: tuple[Def, ...]
    if isinstance(dom, Sigma):
        fields = dom.ops
    elif isinstance(dom, Arr) and isinstance(dom.shape, Lit):
        fields = (dom.body,) * dom.shape.value
    else:
        fields = (dom,)
    if not fields or fields[-1].bvd:
        return None
    k = fields[-1]
    if not (isinstance(k, Pi) and isinstance(k.codom, Bot)):
        return None
    args = fields[:-1]
    if any(f.bvd for f in args):
        return None
    return args, k.dom


def c_call(ax: Axiom, site: Loc | None = None) -> CCall:
    """The declaration `ax` matched against its prototype (E-UNSUPPORTED for a function verimim
    has no semantics for, E-TYPE for one that does not fit, both at the declaration)."""
    name = c_name(ax)
    assert name is not None
    proto = PROTOS.get(name)
    if proto is None:
        raise unsupported(name, ax, site)
    parts = split_cn(ax.ops[0])
    if parts is None:
        raise _mismatch(ax, f"its type `{show(ax.ops[0])}` does not end in a return continuation", proto, site)
    arg_types, ret_type = parts
    leaves: list[Leaf] = []
    for t in arg_types:
        sub = type_leaves(t)
        if sub is None:
            raise _mismatch(ax, f"`{show(t)}` is not a C argument type", proto, site)
        leaves += sub
    n = len(proto.params)
    if len(leaves) < n or (len(leaves) > n and not proto.variadic):
        raise _mismatch(ax, f"it passes {len(leaves)} argument(s), C takes "
                        f"{n if not proto.variadic else f'at least {n}'}", proto, site)
    for j, (leaf, ct) in enumerate(zip(leaves, proto.params)):
        _fits(ax, leaf, ct, f"argument {j + 1}", proto, site)
    ret = type_leaves(ret_type)
    if ret is None or len(ret) > 1:
        raise _mismatch(ax, f"the result `{show(ret_type)}` is not one C value", proto, site)
    ret_leaf = ret[0] if ret else None
    if ret_leaf is not None:
        if proto.ret is None:
            raise _mismatch(ax, f"it expects a result ({ret_leaf}), C returns void", proto, site)
        _fits(ax, ret_leaf, proto.ret, "the result", proto, site)
    return CCall(proto, ax, arg_types, tuple(leaves), ret_type, ret_leaf)


def declaration_errors(nodes: Iterable[Def]) -> list[VerimimError]:
    """E-TYPE for each C function among `nodes` whose declaration does not fit the prototype of
    the function verimim knows by that name: what `run` and `compile` report at the declaration,
    for `check` to report too. (A function verimim does not know is no error here: `check`
    accepts upstream's programs that declare their own, and only running one needs it.)"""
    out: list[VerimimError] = []
    for d in nodes:
        name = c_name(d)
        if name is None or name not in PROTOS:
            continue
        assert isinstance(d, Axiom)
        try:
            c_call(d)
        except VerimimError as e:
            if e.code == "E-TYPE":
                out.append(e)
    return out


def _fits(ax: Axiom, leaf: Leaf, ct: CType, what: str, proto: CProto, site: Loc | None) -> None:
    if isinstance(ct, CPtr):
        if leaf.kind != "ptr":
            raise _mismatch(ax, f"{what} is {leaf}, C takes a pointer", proto, site)
        if leaf.space != 0:
            raise _mismatch(ax, f"{what} points into address space {leaf.space}; C functions run on "
                            f"the host (address space 0)", proto, site)
        return
    if leaf.kind != "int":
        raise _mismatch(ax, f"{what} is a pointer, C takes `{ct}`", proto, site)
    if leaf.bits > ct.bits:
        raise _mismatch(ax, f"{what} is {leaf}, wider than C's `{ct}`", proto, site)


def widen(value: int, bits: int, ct: CInt) -> int:
    """A declared integer of `bits` bits (a value in [0, 2^bits)) as C's parameter type sees it,
    as a value in [0, 2^ct.bits): sign extension from 8 bits up, zero extension for `Bool`."""
    value %= 1 << bits
    if bits >= 8 and value >> (bits - 1) and bits < ct.bits:
        value -= 1 << bits
    return value % (1 << ct.bits)


def signed(value: int, bits: int) -> int:
    value %= 1 << bits
    return value - (1 << bits) if value >> (bits - 1) else value
