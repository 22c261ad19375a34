"""`main` in every form upstream writes it, and values built along a C-like signature.

Upstream's programs declare `main` as
  `fun extern main (mem: %mem.M 0, argc: I32, argv: …): [%mem.M 0, I32]`   (`Cn [[M, I32, P], Cn [M, I32]]`),
  `con extern main (mem, argc, argv, return: Cn [%mem.M 0, I32])`           (`Cn [M, I32, P, Cn [M, I32]]`),
  `fun extern main (argc, argv): I32`                                        (`Cn [[I32, P], Cn I32]`),
or without argc/argv (`fun extern main (mem: %mem.M 0): [%mem.M 0, I32]`). All of them are C's
`int main(int argc, char** argv)` once memory tokens are dropped, the same reading as for C
functions (verimim.plug.c_lib): the data leaves before the return continuation are `argc` and
`argv` (or none), the continuation's domain holds the one `I32` result. The interpreter
(verimim.interp.machine) and compiled host code (verimim.runtime.host) both read `main` here.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from verimim.diagnostics import VerimimError
from verimim.interp.values import Token, Value
from verimim.ir.defs import App, Arr, Axiom, Def, Lit, MutLam, Pi, Sigma
from verimim.plug.c_lib import Leaf, split_cn, type_leaves
from verimim.printer import show

FORMS = ("`fun extern main (mem: %mem.M 0, argc: I32, argv: …): [%mem.M 0, I32]`, "
         "`con extern main (mem: %mem.M 0, argc: I32, argv: …, return: Cn [%mem.M 0, I32])`, "
         "`fun extern main (argc: I32, argv: …): I32`, or any of them without argc and argv")


@dataclass(frozen=True)
class MainForm:
    """main's parameter type `dom`, whether it takes argc/argv, and its result's type."""

    dom: Def
    takes_args: bool
    ret_type: Def


def main_form(main: MutLam) -> MainForm:
    pi = main.pi
    parts = split_cn(pi)
    leaves = [type_leaves(t) for t in parts[0]] if parts is not None else []
    ret = type_leaves(parts[1]) if parts is not None else None
    args: list[Leaf] | None = [x for sub in leaves if sub is not None for x in sub] \
        if all(sub is not None for sub in leaves) else None
    ok_args = args is not None and [(a.kind, a.bits if a.kind == "int" else 0) for a in args] in ([], [("int", 32), ("ptr", 0)])
    if parts is None or not ok_args or ret is None or [(r.kind, r.bits) for r in ret] != [("int", 32)]:
        raise VerimimError("E-TYPE", f"`main` of type `{show(pi)}`: main must be {FORMS}", main.loc)
    return MainForm(pi.dom, bool(args), parts[1])


def build(t: Def, leaves: Iterator[Value], cont: Value = None) -> Value:
    """A value of type t from the values of its data leaves in order (memory tokens made,
    continuation-typed fields `cont`)."""
    if isinstance(t, Sigma):
        return tuple(build(f, leaves, cont) for f in t.ops)
    if isinstance(t, Arr) and isinstance(t.shape, Lit):
        return tuple(build(t.body, leaves, cont) for _ in range(t.shape.value))
    if isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.M":
        return Token(t.arg.value if isinstance(t.arg, Lit) else 0)
    if isinstance(t, Pi):
        return cont
    return next(leaves)


def flatten(t: Def, v: Value, out: list[Value]) -> None:
    """The inverse of `build`: v's data leaves into out (memory tokens and continuations have
    none)."""
    if isinstance(t, Sigma):
        for f, x in zip(t.ops, v):
            flatten(f, x, out)
    elif isinstance(t, Arr):
        for x in v:
            flatten(t.body, x, out)
    elif isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.M" or isinstance(t, Pi):
        return
    else:
        out.append(v)
