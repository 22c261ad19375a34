"""Lexical scopes and lazily elaborated declarations.

Declarations of one block may refer to each other in any order, so each is registered as a
`Lazy` and elaborated on first use (or when the block is done). A `let` in a body binds
sequentially: later lets shadow earlier ones in the same scope.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from verimim.diagnostics import Loc, TypeError_, VerimimError
from verimim.ir.defs import Def


class Lazy:
    """A declaration elaborated on first demand; a demand while in progress is a cycle."""

    __slots__ = ("name", "loc", "thunk", "value", "busy", "error")

    def __init__(self, name: str, loc: Loc, thunk: Callable[[], Def]) -> None:
        self.name = name
        self.loc = loc
        self.thunk = thunk
        self.value: Def | None = None
        self.busy = False
        self.error: Exception | None = None  # why the declaration failed: every use re-raises it

    def force(self, use: Loc | None = None) -> Def:
        if self.value is not None:
            return self.value
        if self.error is not None:
            raise self.error
        if self.busy:
            raise TypeError_(f"`{self.name}` is defined in terms of itself; only continuations "
                             f"(`con`/`fun`) and `lam`s with a declared type may be recursive",
                             use or self.loc)
        self.busy = True
        try:
            self.value = self.thunk()
        except VerimimError as e:
            self.error = e
            raise
        finally:
            self.busy = False
        return self.value


Entry = Def | Lazy


class Scope:
    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Entry] = {}

    def child(self) -> Scope:
        return Scope(self)

    def bind(self, name: str, entry: Entry) -> None:
        if name == "_":
            return
        self.names[name] = entry

    def lookup(self, name: str) -> Entry | None:
        s: Scope | None = self
        while s is not None:
            hit = s.names.get(name)
            if hit is not None:
                return hit
            s = s.parent
        return None

    def all_names(self) -> Iterator[str]:
        s: Scope | None = self
        while s is not None:
            yield from s.names
            s = s.parent
