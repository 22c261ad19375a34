"""The nodes of verimim's graph IR (MimIR's `Def`s).

Immutable nodes are created only by `World` and hash-consed: two structurally equal immutable
nodes are the same Python object. Binders (`Pi`, `Sigma`, `Arr`, `Pack`, immutable `Lam`) are
*locally nameless*: the bound variable is `BVar(k)` (a de Bruijn index counting enclosing
binders), so alpha-equivalent terms are identical too. A `Sigma` binds its own value (MimIR's
sigma var): field j of `[x: Nat, y: Idx x]` refers to field 0 as `BVar(0)#0`.

Mutable nodes are explicit and nominal: `MutLam` (continuations and lambdas that may be
recursive or capture other mutables), `Hole` (a metavariable of type inference) and `Param` (a
free variable standing for a binder while the elaborator works under it). A `MutLam`'s
parameter is `Var(lam)`, an immutable node.

Debug information (`name`, `loc`) never takes part in identity: the first creation keeps it.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, ClassVar

from verimim.diagnostics import Loc

if TYPE_CHECKING:
    from verimim.ir.world import World

_gid = itertools.count()


def gid_mark() -> int:
    """A fresh id: every node made after this call has a larger `gid` (what a caller made)."""
    return next(_gid)


class Def:
    """Base of all nodes. `ops` are the operands; `binder_ops` names the operand positions that
    lie under this node's binder (one more enclosing binder for BVar indices)."""

    __slots__ = ("ops", "gid", "loc", "name", "let_name", "bvd", "has_hole", "has_param", "_type", "home",
                 "__weakref__")
    binder_ops: ClassVar[frozenset[int]] = frozenset()
    mutable: ClassVar[bool] = False

    def __init__(self, ops: tuple[Def, ...]) -> None:
        self.ops = ops
        self.gid = next(_gid)
        self.loc: Loc | None = None
        self.name: str | None = None
        # The name a `let` first bound this value to (messages print operands by it); like
        # `loc`, no part of the node's identity.
        self.let_name: str | None = None
        self._type: Def | None = None
        self.home = 0  # the serial of the World that made it (World.serial; 0: none)
        bvd = 0
        has_hole = False
        has_param = False
        binders = self.binder_ops
        for i, op in enumerate(ops):
            d = op.bvd - 1 if binders and i in binders else op.bvd
            if d > bvd:
                bvd = d
            if op.has_hole:
                has_hole = True
            if op.has_param:
                has_param = True
        self.bvd = bvd  # 1 + the largest dangling de Bruijn index; 0: locally closed
        self.has_hole = has_hole
        self.has_param = has_param

    def extra(self) -> tuple[Any, ...]:
        """Non-Def data that takes part in identity (a literal's value, a level, ...)."""
        return ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        """The same kind of node with other operands, built (and normalized) by `world`."""
        raise NotImplementedError(type(self).__name__)

    @property
    def closed(self) -> bool:
        return self.bvd == 0

    def __repr__(self) -> str:
        from verimim.printer import show

        return f"<{type(self).__name__} {show(self)}>"


# ----------------------------------------------------------------------------- universes and base types


class Univ(Def):
    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.univ()


class TypeU(Def):
    """`Type l`: `*` is `Type 0`, `□` is `Type 1`."""

    __slots__ = ("level",)

    def __init__(self, level: int) -> None:
        super().__init__(())
        self.level = level

    def extra(self) -> tuple[Any, ...]:
        return (self.level,)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.type_u(self.level)


class NatT(Def):
    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.nat()


class IdxT(Def):
    """`Idx n`: the naturals below n."""

    __slots__ = ()

    @property
    def size(self) -> Def:
        return self.ops[0]

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.idx(ops[0])


class Lit(Def):
    """A literal of type `ops[0]` (Nat, Idx n, or any type for `42:T`)."""

    __slots__ = ("value",)

    def __init__(self, type_: Def, value: int) -> None:
        super().__init__((type_,))
        self.value = value

    def extra(self) -> tuple[Any, ...]:
        return (self.value,)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.lit(ops[0], self.value)


class Top(Def):
    """`⊤:T`."""

    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.top(ops[0])


class Bot(Def):
    """`⊥:T`; `Cn T` is `T → ⊥:*`."""

    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.bot(ops[0])


class Axiom(Def):
    """An axiom, named by its annex name (`core.nat.add`); its type is `ops[0]`."""

    __slots__ = ("annex",)

    def __init__(self, annex: str, type_: Def) -> None:
        super().__init__((type_,))
        self.annex = annex

    def extra(self) -> tuple[Any, ...]:
        return (self.annex,)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return self


# ----------------------------------------------------------------------------- binders and their values


class Pi(Def):
    """`dom → codom` with codom under the binder; `implicit` for `{…} →`."""

    __slots__ = ("implicit", "_names")
    binder_ops = frozenset({1})

    def __init__(self, dom: Def, codom: Def, implicit: bool) -> None:
        super().__init__((dom, codom))
        self.implicit = implicit
        self._names: tuple[str | None, ...] | None = None

    @property
    def dom(self) -> Def:
        return self.ops[0]

    @property
    def codom(self) -> Def:
        return self.ops[1]

    def extra(self) -> tuple[Any, ...]:
        return (self.implicit,)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.pi(ops[0], ops[1], self.implicit, names=self.names)

    @property
    def names(self) -> tuple[str | None, ...] | None:
        """The names the domain's binders had where this Pi was first written (debug only)."""
        return self._names

    def set_names(self, names: tuple[str | None, ...] | None) -> None:
        if names is not None and self._names is None and any(n for n in names):
            self._names = names


class Sigma(Def):
    """`[A, B x, …]`: every field lies under the binder of the sigma's own value."""

    __slots__ = ("_names",)
    binder_ops = frozenset(range(1 << 16))  # all fields

    def __init__(self, fields: tuple[Def, ...]) -> None:
        super().__init__(fields)
        self._names: tuple[str | None, ...] | None = None

    @property
    def names(self) -> tuple[str | None, ...] | None:
        return self._names

    def set_names(self, names: tuple[str | None, ...] | None) -> None:
        if names is not None and self._names is None and any(n for n in names):
            self._names = names

    @property
    def dependent(self) -> bool:
        return any(mentions(f, 0) for f in self.ops)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.sigma(ops, names=self._names)


class Arr(Def):
    """`«shape; body»` with body under the binder of the index."""

    __slots__ = ("index_name", "field_names")
    binder_ops = frozenset({1})

    def __init__(self, shape: Def, body: Def) -> None:
        super().__init__((shape, body))
        self.index_name: str | None = None
        self.field_names: tuple[str | None, ...] | None = None  # when written as a named sigma

    @property
    def shape(self) -> Def:
        return self.ops[0]

    @property
    def body(self) -> Def:
        return self.ops[1]

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.arr(ops[0], ops[1], index_name=self.index_name)


class Pack(Def):
    """`‹shape; body›` with body under the binder of the index."""

    __slots__ = ("index_name",)
    binder_ops = frozenset({1})

    def __init__(self, shape: Def, body: Def) -> None:
        super().__init__((shape, body))
        self.index_name: str | None = None

    @property
    def shape(self) -> Def:
        return self.ops[0]

    @property
    def body(self) -> Def:
        return self.ops[1]

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.pack(ops[0], ops[1], index_name=self.index_name)


class Tuple(Def):
    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.tuple(ops)


class Extract(Def):
    __slots__ = ()

    @property
    def tup(self) -> Def:
        return self.ops[0]

    @property
    def index(self) -> Def:
        return self.ops[1]

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.extract(ops[0], ops[1])


class Insert(Def):
    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.insert(ops[0], ops[1], ops[2])


class Join(Def):
    """The union type `T1 ∪ T2 ∪ …` (upstream's Join): its members, in a canonical order."""

    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.join(ops)


class Inject(Def):
    """`v inj U`: the value v (of one member type of the union U) as a value of U.
    ops = (v, U)."""

    __slots__ = ()

    @property
    def value(self) -> Def:
        return self.ops[0]

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.inject(ops[0], ops[1])


class Match(Def):
    """`match u with | p1 => e1 | …`: ops = (u, arm_1, …, arm_n), arm_i a function from the
    union's i-th member type (in the Join's order) to the result type."""

    __slots__ = ()

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.match(ops[0], ops[1:])


class App(Def):
    """`callee arg`. `head` is the innermost callee of a curried chain and `depth` how many
    arguments it has received (1 for `f a`, 2 for `f a b`)."""

    __slots__ = ("head", "depth")

    def __init__(self, ops: tuple[Def, ...]) -> None:
        super().__init__(ops)
        callee = ops[0]
        if isinstance(callee, App):
            self.head: Def = callee.head
            self.depth: int = callee.depth + 1
        else:
            self.head = callee
            self.depth = 1

    @property
    def callee(self) -> Def:
        return self.ops[0]

    @property
    def arg(self) -> Def:
        return self.ops[1]

    def args(self) -> list[Def]:
        """The arguments of the curried chain, outermost application last."""
        out: list[Def] = []
        d: Def = self
        while isinstance(d, App):
            out.append(d.arg)
            d = d.callee
        out.reverse()
        return out

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return world.app(ops[0], ops[1])


class Lam(Def):
    """An immutable (non-recursive) lambda: `ops = (pi, body)`, body under the binder."""

    __slots__ = ()
    binder_ops = frozenset({1})

    @property
    def pi(self) -> Pi:
        p = self.ops[0]
        assert isinstance(p, Pi)
        return p

    @property
    def body(self) -> Def:
        return self.ops[1]

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        pi = ops[0]
        assert isinstance(pi, Pi)
        return world.lam(pi, ops[1], name=self.name)


class BVar(Def):
    """A bound variable: the value of the `index`-th enclosing binder (0 = innermost)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        super().__init__(())
        self.index = index
        self.bvd = index + 1

    def extra(self) -> tuple[Any, ...]:
        return (self.index,)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return self


class Var(Def):
    """The parameter of a mutable lambda; `ops[0]` is the lambda."""

    __slots__ = ()

    @property
    def mut(self) -> MutLam:
        m = self.ops[0]
        assert isinstance(m, MutLam)
        return m

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return self


# ----------------------------------------------------------------------------- mutables


class Param(Def):
    """A free variable that stands for a binder's value while the elaborator works under it."""

    __slots__ = ()
    mutable = True

    def __init__(self, type_: Def, name: str | None) -> None:
        super().__init__(())
        self._type = type_
        self.name = name
        self.has_param = True

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return self


class Hole(Def):
    """A metavariable of type inference, solved at most once."""

    __slots__ = ("value", "hint")
    mutable = True

    def __init__(self, type_: Def | None, hint: str) -> None:
        super().__init__(())
        self._type = type_
        self.value: Def | None = None
        self.hint = hint
        self.has_hole = True

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return self


class MutLam(Def):
    """A mutable (nominal) lambda or continuation: created with its type, body set later.
    `kind` is "con", "fun" or "lam" as declared; `external` for `extern` declarations."""

    # `_scans`: verimim.ir.analysis.scan_mut's results, kept for the body they were found in
    # (a cache, never copied: verimim.ir.copy)
    __slots__ = ("pi", "body", "kind", "external", "annex", "doc", "param_names", "_scans")
    mutable = True
    _scans: dict[bool, tuple[Def, Def, frozenset[MutLam], frozenset[MutLam]]]

    def __init__(self, pi: Pi, name: str, kind: str) -> None:
        super().__init__(())
        self.pi = pi
        self._type = pi
        self.name = name
        self.kind = kind
        self.body: Def | None = None
        self.external = False
        self.annex: str | None = None
        self.doc: str | None = None
        self.param_names: tuple[str | None, ...] | None = None  # the source's names (printing)

    def rebuild(self, world: World, ops: tuple[Def, ...]) -> Def:
        return self

    def __repr__(self) -> str:
        return f"<MutLam {self.name}>"


# ----------------------------------------------------------------------------- helpers


def mentions(d: Def, index: int, memo: dict[tuple[int, int], bool] | None = None) -> bool:
    """Whether `d` refers to the binder `index` levels up (BVar(index) at depth 0)."""
    if d.bvd <= index:
        return False
    if isinstance(d, BVar):
        return d.index == index
    if memo is None:
        memo = {}
    key = (d.gid, index)
    hit = memo.get(key)
    if hit is not None:
        return hit
    res = False
    for i, op in enumerate(d.ops):
        if mentions(op, index + 1 if i in d.binder_ops else index, memo):
            res = True
            break
    memo[key] = res
    return res
