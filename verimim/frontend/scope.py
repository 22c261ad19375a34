"""Lexical scopes and lazily elaborated declarations.

Declarations of one block may refer to each other in any order, so each is registered as a
`Lazy` and elaborated on first use (or when the block is done). A `let` in a body binds
sequentially: later lets shadow earlier ones in the same scope.

A block may bind one name several times (`let a = 1I32; let a = a + 1I32;`). As upstream binds
declarations in source order, a use inside the block refers to the nearest binding of the name
before it; only when none precedes is it a forward reference, to the first one after it
(`DeclView`). Uses after the block (its body, importers) see the last binding.
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
        self.names: dict[str, Entry] = {}  # the last binding of each name
        # Bindings made by the declaration at a position of the block (bind_at), by position.
        self.positions: dict[str, list[tuple[int, Entry]]] = {}

    def child(self) -> Scope:
        return Scope(self)

    def bind(self, name: str, entry: Entry) -> None:
        if name == "_":
            return
        self.names[name] = entry

    def bind_at(self, name: str, entry: Entry, pos: int) -> None:
        """Bind `name` as declared by the block's declaration number `pos`."""
        if name == "_":
            return
        entries = self.positions.setdefault(name, [])
        entries.append((pos, entry))
        entries.sort(key=lambda pe: pe[0])  # stable: one declaration's rebindings keep their order
        if entries[-1][1] is entry:
            self.names[name] = entry  # bodies are elaborated out of order: the last by position wins

    def at(self, pos: int, own: bool) -> DeclView:
        """The block as the declaration at `pos` sees it (`own`: its own names are visible in it,
        as a recursive function's; a `let`'s are not)."""
        return DeclView(self, pos, own)

    def find_here(self, name: str) -> Entry | None:
        return self.names.get(name)

    def binding_at(self, name: str, pos: int) -> Entry | None:
        """What the block's declaration number `pos` bound `name` to (a rebound name has one
        binding per declaration; `names` holds the last), else the block's binding of it."""
        own = [e for p, e in self.positions.get(name, ()) if p == pos]
        return own[-1] if own else self.names.get(name)

    def lookup(self, name: str) -> Entry | None:
        s: Scope | None = self
        while s is not None:
            hit = s.find_here(name)
            if hit is not None:
                return hit
            s = s.parent
        return None

    def all_names(self) -> Iterator[str]:
        s: Scope | None = self
        while s is not None:
            yield from s.names
            s = s.parent


class DeclView(Scope):
    """A block seen from one of its declarations: a name the block binds several times is the
    nearest binding before `pos` (at `pos` too with `own`), else the first one after it where no
    enclosing scope binds the name. A name the declaration binds lands in the block at `pos`."""

    def __init__(self, block: Scope, pos: int, own: bool) -> None:
        super().__init__(block.parent)
        self.block = block
        self.pos = pos
        self.own = own
        self.names = block.names  # (all_names, error hints)

    def bind(self, name: str, entry: Entry) -> None:
        self.block.bind_at(name, entry, self.pos)

    def bind_at(self, name: str, entry: Entry, pos: int) -> None:
        self.block.bind_at(name, entry, pos)

    def at(self, pos: int, own: bool) -> DeclView:
        return self.block.at(pos, own)

    def find_here(self, name: str) -> Entry | None:
        entries = self.block.positions.get(name)
        if not entries:
            return self.block.names.get(name)  # bound without a position
        before = [e for p, e in entries if p < self.pos or (self.own and p == self.pos)]
        if before:
            return before[-1]
        # never a `let`'s own binding: its value sees the name as bound around it (upstream binds
        # the value before the name: `where let argc = argc + 41I32; end` reads main's argc)
        after = [e for p, e in entries if p > self.pos]
        if not after:
            return None
        # A name declared later in the block is seen from here (LANGUAGE.md: declarations of a
        # block may refer to each other) only where nothing around the block binds it: upstream
        # binds a block's declarations in order, and there the outer binding is what a use before
        # the declaration means (`let r = f argc; lam f …` calls the outer `f`).
        return after[0] if self.parent is None or self.parent.lookup(name) is None else None
