"""Run-time values of the reference interpreter.

`Nat` and `Idx n` values are Python ints, tuples are Python tuples, types are IR `Def`s (closed:
run-time values substituted), memory tokens are `Token`s. Pointers point into `Block`s
(verimim.interp.memory); closures pair a mutable lambda with the values of the enclosing
mutables' parameters it may use.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import Loc, Related, VerimimError
from verimim.ir.defs import Axiom, Lam, MutLam

Value = Any


class Address(int):
    """The integer a pointer's `core.bitcast` gives (ptrtoint): its address, which is the
    interpreter's own block id and differs from run to run (and from a phase's output's run).
    Stored unchanged, it is marked in the block's pointer shadow like a stored pointer, so that
    what observes the heap names it (verimim.interp.observe); arithmetic on it gives a plain
    int, which stays a number."""

    __slots__ = ()


@dataclass(frozen=True)
class Token:
    """A memory token `mem.M a`; it carries no data, only the order of effects."""

    space: int


@dataclass(frozen=True)
class Closure:
    mut: MutLam
    env: dict[int, Value] = field(hash=False, compare=False)

    def __repr__(self) -> str:
        return f"<closure {self.mut.name}>"


@dataclass(eq=False)
class LamValue:
    """An immutable lambda as a value: the activation that made it (its environment, and its
    frame with the slot of each node it computed), from which a call takes the values of the
    nodes the lambda's body shares with its creator — computed there once, never again."""

    lam: Lam
    env: dict[int, Value]
    frame: list[Value]
    slots: dict[int, int]
    captures: dict[int, Value] | None = None  # filled on the first call (Machine.lam_captures)

    def __repr__(self) -> str:
        return f"<lam {self.lam.name or 'λ'}>"


@dataclass(frozen=True)
class Tagged:
    """A value of a union type: which member (its position in the Join) and the value."""

    tag: int
    value: Value


@dataclass(frozen=True)
class Partial:
    """An axiom applied to some of its curried arguments."""

    axiom: Axiom
    args: tuple[Value, ...]


@dataclass(frozen=True)
class Halt:
    """The continuation that ends the program (main's `return`)."""


@dataclass(frozen=True)
class KernelReturn:
    """The `return` continuation handed to a kernel work-item."""


@dataclass(frozen=True)
class Stream:
    handle: int


class RuntimeFault(VerimimError):
    """Undefined behaviour (or an unsupported construct) found while running a program."""

    def __init__(self, code: str, message: str, loc: Loc | None = None,
                 related: tuple[Related, ...] = ()) -> None:
        super().__init__(code, message, loc, related)


def holds_bottom(v: object) -> bool:
    """Whether a run-time value is ⊥ or holds one (the interpreter's ⊥ of any type is None)."""
    if v is None:
        return True
    return isinstance(v, tuple) and any(holds_bottom(x) for x in v)


def bottom_used(what: str, loc: Loc | None) -> RuntimeFault:
    """A computation that needs the value of ⊥ (undefined: the program never gave it one)."""
    return RuntimeFault("E-UNINIT", f"{what} uses an undefined value (`⊥`, or `⊤` as a run-time value)", loc)


class FuelExhausted(RuntimeFault):
    def __init__(self, fuel: int, loc: Loc | None) -> None:
        super().__init__("E-FUEL", f"execution ran past its step bound of {fuel} steps "
                         f"(probably non-terminating; raise it with --fuel)", loc)
