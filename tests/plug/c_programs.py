"""Small programs calling C functions, shared by the interpreter and host-code tests.

A C declaration is the axiom `c.NAME` of the declared type (the frontend's contract for `ccon`
/ `cfun`); these programs declare it with `axm %c.NAME: T`, which builds exactly that axiom.
"""
from __future__ import annotations

from verimim.diagnostics import Loc
from verimim.frontend.loader import load_text
from verimim.interp.machine import Machine, find_main
from verimim.interp.values import RuntimeFault
from verimim.ir.world import World

STR = "%mem.Ptr0 «⊤:Nat; I8»"
MEM = "%mem.M 0"

# C name → its declaration's type, `cfun`-style (`Cn [[D], Cn R]`) so that `ret` calls it.
CFUN = {
    "atoi": f"[{MEM}, {STR}] → [{MEM}, I32]",
    "strlen": f"[{MEM}, {STR}] → [{MEM}, Nat]",
    "puts": f"[{MEM}, {STR}] → [{MEM}, I32]",
    "putchar": f"[{MEM}, I32] → [{MEM}, I32]",
    "malloc": f"[{MEM}, Nat] → [{MEM}, {STR}]",
    "free": f"[{MEM}, {STR}] → {MEM}",
    "print_char": f"[{MEM}, I8] → {MEM}",
    "println_char": f"[{MEM}, I8] → {MEM}",
    "print_str": f"[{MEM}, {STR}] → {MEM}",
    "println_str": f"[{MEM}, {STR}] → {MEM}",
    "print_i32": f"[{MEM}, I32] → {MEM}",
    "println_i32": f"[{MEM}, I32] → {MEM}",
    "newline": f"{MEM} → {MEM}",
    "print_integer": f"[{MEM}, I32] → {MEM}",
    "print_int_newline": f"[{MEM}, I32] → {MEM}",
    "print_newline": f"{MEM} → {MEM}",
    "print_int_vector": f"[{MEM}, I32, %mem.Ptr0 «⊤:Nat; I32»] → {MEM}",
    "print_int_matrix": f"[{MEM}, I32, I32, %mem.Ptr0 «⊤:Nat; I32»] → {MEM}",
}

HEADER = "plugin core;\nplugin mem;\n"
MAIN = f"fun extern main(mem: {MEM}, argc: I32, argv: %mem.Ptr0 «⊤:Nat; {STR}»): [{MEM}, I32] =\n"


def cfun(name: str, type_: str | None = None) -> str:
    """The declaration of `name` as a function `Cn [D, Cn R]` (type `D → R` written as Fn)."""
    t = type_ or CFUN[name]
    dom, cod = t.split(" → ")
    return f"axm %c.{name}: Cn [{dom}, Cn {cod}];\n"


def ccon(name: str, dom: str) -> str:
    """A continuation-style declaration `Cn [dom]`."""
    return f"axm %c.{name}: Cn [{dom}];\n"


def string(var: str, text: bytes, nul: bool = True, heap: bool = False) -> str:
    """Body lines that put `text` (NUL-terminated unless told) into a fresh block of exactly
    its size and bind `var` to a `char*` to it."""
    data = text + (b"\0" if nul else b"")
    n = len(data)
    elems = ", ".join(f"{b}I8" for b in data)
    value = f"({elems})" if n > 1 else f"{data[0]}I8"
    alloc = f"%mem.malloc («{n}; I8», 0) (mem, {n})" if heap else f"%mem.slot («{n}; I8», 0) (mem, 0)"
    return (f"    let (mem, {var}_b) = {alloc};\n"
            f"    let mem = %mem.store (mem, {var}_b, {value});\n"
            f"    let {var} = %core.bitcast ({STR}) {var}_b;\n")


def program(decls: str, body: str) -> str:
    return HEADER + decls + MAIN + body


def load(src: str) -> World:
    world, _ = load_text(src, "<c-test>")
    return world


def run(src: str, argv: list[str] | None = None) -> tuple[int, bytes, Machine]:
    world = load(src)
    m = Machine(world)
    result = m.run_main(find_main(world), argv or ["prog"])
    return result, bytes(m.stdout), m


def fault(src: str, argv: list[str] | None = None) -> tuple[RuntimeFault, bytes]:
    world = load(src)
    m = Machine(world)
    try:
        m.run_main(find_main(world), argv or ["prog"])
    except RuntimeFault as e:
        return e, bytes(m.stdout)
    raise AssertionError(f"no fault; printed {bytes(m.stdout)!r}")


def line_of(src: str, needle: str) -> int:
    """The 1-based line of the first line containing needle."""
    for i, ln in enumerate(src.splitlines(), 1):
        if needle in ln:
            return i
    raise AssertionError(needle)


def at_line(loc: Loc | None) -> int:
    assert loc is not None
    return loc.line
