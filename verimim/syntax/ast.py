"""The surface syntax tree of Mim (spec/LANGUAGE.md), as the parser produces it.

Every node keeps its source position in `loc`. Nodes are frozen dataclasses; lists are tuples.
The parser desugars only what is purely syntactic: ASCII/Unicode spellings, `«2, 3; T»` into
nested arrays, name groups `a b: T` into one element per name (sharing the type expression),
and upstream's `%`-prefix on annex names. Everything with meaning (currying, `fun`'s `return`,
`Fn`, `ret`) is left to the elaborator.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal as TLiteral, Union

from verimim.diagnostics import Loc

# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    loc: Loc


@dataclass(frozen=True)
class NumLit(Expr):
    """`42`, `0x1F`, `1'000` (Nat unless ascribed); `42I32`/`7i8` (bits=32/8: type Idx 2^bits);
    `3_4`/`3₄` (size=4: type Idx 4); `42:T` (ascribed=T)."""

    value: int
    bits: int | None = None
    size: int | None = None
    ascribed: Expr | None = None


@dataclass(frozen=True)
class BoolLit(Expr):
    """`ff` / `tt`."""

    value: bool


@dataclass(frozen=True)
class TopBot(Expr):
    """`⊤:T` / `⊥:T` (`top`/`bot` in ASCII); `type` is None when not ascribed."""

    top: bool
    type: Expr | None


@dataclass(frozen=True)
class CharLit(Expr):
    """`'a'`: an I8. `ascribed`: a `:T` written after it, which upstream refuses (E-TYPE)."""

    value: int
    ascribed: Expr | None = None


@dataclass(frozen=True)
class StrLit(Expr):
    """`"text"`: a «n; I8», one I8 per byte, no NUL added (as upstream). `ascribed`: a `:T`
    written after it, which upstream refuses (E-TYPE)."""

    value: bytes
    ascribed: Expr | None = None


@dataclass(frozen=True)
class Name(Expr):
    """An identifier or dotted annex name: `m0`, `core.nat.add`, `%gpu.init` (parts without `%`)."""

    parts: tuple[str, ...]
    percent: bool = False

    @property
    def text(self) -> str:
        return ".".join(self.parts)


BuiltinName = TLiteral["Nat", "Bool", "I1", "I8", "I16", "I32", "I64", "Univ", "*", "□", "Idx"]


@dataclass(frozen=True)
class Builtin(Expr):
    """A predefined type name: `Nat Bool I1 I8 I16 I32 I64 Univ` and `*` (Type 0), `□` (Type 1);
    `Idx` without an operand is the type former `Idx: Nat → *` itself (as upstream)."""

    name: str


@dataclass(frozen=True)
class IdxType(Expr):
    """`Idx e`."""

    size: Expr


@dataclass(frozen=True)
class TypeUniverse(Expr):
    """`Type e`."""

    level: Expr


@dataclass(frozen=True)
class Tuple(Expr):
    """`(a, b, c)`; `()` is the unit value; `(e)` is parsed as `e` itself (no Tuple node)."""

    elems: tuple[Expr, ...]


@dataclass(frozen=True)
class SigmaElem:
    """One element of a sigma type `[x: A, B]`: name None for an anonymous element."""

    loc: Loc
    name: str | None
    type: Expr


@dataclass(frozen=True)
class Sigma(Expr):
    """`[A, B]`, `[x: A, y: B x]`, `[a b: Nat, T: *]` (groups already split); `[]` is the unit type."""

    elems: tuple[SigmaElem, ...]


@dataclass(frozen=True)
class Arr(Expr):
    """`«n; T»` or `«i: n; T»` (`index` names the bound index). `«2, 3; T»` is `«2; «3; T»»`."""

    index: str | None
    shape: Expr
    body: Expr


@dataclass(frozen=True)
class Pack(Expr):
    """`‹n; e›` or `‹i: n; e›`."""

    index: str | None
    shape: Expr
    body: Expr


@dataclass(frozen=True)
class App(Expr):
    """`f a` (explicit=False: implicit arguments are inferred) or `f @ a` (explicit=True)."""

    callee: Expr
    arg: Expr
    explicit: bool = False


@dataclass(frozen=True)
class Extract(Expr):
    """`e # i`. `e # name` (a bare identifier: `by_name`) names a field of e's sigma type when it
    has one, else the variable; `e # (name)` is always the variable (as upstream: field names
    take precedence over lexical names)."""

    tuple: Expr
    index: Expr
    by_name: bool = False


@dataclass(frozen=True)
class Insert(Expr):
    """`ins (e, i, v)`: e with element i replaced by v."""

    tuple: Expr
    index: Expr
    value: Expr


@dataclass(frozen=True)
class Pi(Expr):
    """`A → B`; `[x: A, y: B] → C` (names of a Sigma domain bind in the codomain);
    `{T: *} → B` (implicit=True; dom is then a Sigma)."""

    dom: Expr
    codom: Expr
    implicit: bool = False
    alias: str | None = None  # `[…] as x → e`: x names the whole domain value in e


@dataclass(frozen=True)
class Cn(Expr):
    """`Cn T`."""

    dom: Expr


@dataclass(frozen=True)
class Fn(Expr):
    """`Fn A → B` (= `Cn [A, Cn B]`); names of a Sigma domain bind in the codomain."""

    dom: Expr
    codom: Expr


# ----------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Pattern:
    loc: Loc


@dataclass(frozen=True)
class PVar(Pattern):
    """`x` or `x: T` (type None when not annotated); name `_` binds nothing."""

    name: str
    type: Expr | None = None


@dataclass(frozen=True)
class PTuple(Pattern):
    """`(p, q: T, a b: T)` with groups split; `()` is the unit pattern.
    `implicit=True` for a `{…}` domain of a lambda/function declaration.
    `brackets=True` for the `[…]` spelling (a sigma pattern, every element typed)."""

    elems: tuple[Pattern, ...]
    implicit: bool = False
    brackets: bool = False


@dataclass(frozen=True)
class PAs(Pattern):
    """`p as x`."""

    pattern: Pattern
    name: str


# ----------------------------------------------------------------------------- binding expressions


LamKind = TLiteral["lam", "con", "fun"]


@dataclass(frozen=True)
class Lambda(Expr):
    """An anonymous `λ p+ (: T)? = e` (kind "lam", also spelled `lm`), `cn p+ = e` ("con"),
    `fn p+ (: T)? = e` ("fun"). Each domain is a pattern; a PTuple with implicit=True is `{…}`."""

    kind: LamKind
    domains: tuple[Pattern, ...]
    codom: Expr | None
    body: Expr
    filters: tuple[Expr | None, ...] = ()  # `@e` after each domain (partial-evaluation filters)


@dataclass(frozen=True)
class Union_(Expr):
    """`A ∪ B ∪ …`: the union type of its members (upstream's `Join`)."""

    types: tuple[Expr, ...]


@dataclass(frozen=True)
class Inj(Expr):
    """`e inj T`: the value e injected into the union type T."""

    value: Expr
    type: Expr


@dataclass(frozen=True)
class MatchArm:
    loc: Loc
    pattern: Pattern
    body: Expr


@dataclass(frozen=True)
class Match(Expr):
    """`match e with | p => e | …`: eliminates a union value; each arm's pattern has the type
    of one member of the union."""

    scrutinee: Expr
    arms: tuple[MatchArm, ...]


@dataclass(frozen=True)
class RuleType(Expr):
    """`Rule T`: the type of rewrite rules whose meta variables have type T."""

    meta: Expr


@dataclass(frozen=True)
class Ret(Expr):
    """`ret p = f $ x; body`."""

    pattern: Pattern
    callee: Expr
    arg: Expr
    body: Expr


@dataclass(frozen=True)
class Block(Expr):
    """A sequence of declarations followed by an expression: a body `let …; let …; e`, or `{ decl* e }`.
    `braces=True` for the `{ … }` spelling."""

    decls: tuple[Decl, ...]
    expr: Expr
    braces: bool = False


@dataclass(frozen=True)
class Where(Expr):
    """`e where decl* end`."""

    expr: Expr
    decls: tuple[Decl, ...]


# ----------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class Decl:
    loc: Loc
    doc: str | None  # `///` documentation lines joined by "\n", without the slashes


@dataclass(frozen=True)
class DeclAxm(Decl):
    """`axm N: T;` or `axm N(t1, t2): T;` (tags = ("t1", "t2")); `%`-spelled names keep their dots.
    `anx` is never written on axioms: every axiom is an annex."""

    name: tuple[str, ...]
    tags: tuple[str, ...] | None
    type: Expr
    percent: bool = False
    # Upstream's `(tag = alias = …, …)`: further names of each tag, by position in `tags`.
    aliases: tuple[tuple[str, ...], ...] = ()
    normalizer: str | None = None  # `, normalize_x`: upstream's C++ normalizer (ours are Python)
    curry: int | None = None
    trip: int | None = None
    name_loc: Loc | None = None  # where the name is (an error about the name points there)


@dataclass(frozen=True)
class DeclLet(Decl):
    """`let p = e;` / `anx let N = e;` (anx=True, pattern a PVar) / upstream's `let %p.n = e;`
    (anx=True, percent_name=("p", "n"))."""

    pattern: Pattern
    value: Expr
    anx: bool = False
    percent_name: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DeclLam(Decl):
    """`lam|con|fun N dom+ (: T)? = e;` with the `anx` and `extern` flags. `body` is None for a
    declaration without a body (`con N dom;`)."""

    kind: LamKind
    name: str
    domains: tuple[Pattern, ...]
    codom: Expr | None
    body: Expr | None
    anx: bool = False
    extern: bool = False
    percent_name: tuple[str, ...] | None = None
    filters: tuple[Expr | None, ...] = ()  # `@e` after each domain (partial-evaluation filters)


@dataclass(frozen=True)
class DeclC(Decl):
    """`ccon N [D];` (a C function called in continuation-passing style, type `Cn D`) or
    `cfun N [D]: R;` (a C function returning R, type `Fn D → R`)."""

    kind: TLiteral["ccon", "cfun"]
    name: str
    dom: Expr
    codom: Expr | None


@dataclass(frozen=True)
class DeclRecVal(Decl):
    """`rec N (: T)? = e` / `and N (: T)? = e`: a name bound to a value that may refer to itself
    (upstream's recursive declaration, e.g. `rec PiPeline: * = Phase → PiPeline`)."""

    name: str
    percent_name: tuple[str, ...] | None
    type: Expr | None
    value: Expr


@dataclass(frozen=True)
class DeclRule(Decl):
    """`rule N p : lhs (when guard)? => rhs` (`norm` for a normalizing rule): a rewrite rule over
    the meta variables bound by p."""

    name: str
    norm: bool
    pattern: Pattern
    lhs: Expr
    guard: Expr | None
    rhs: Expr


@dataclass(frozen=True)
class DeclMod(Decl):
    """`mod N { decl* }` / `pub mod N { decl* }`."""

    name: str
    decls: tuple[Decl, ...]
    pub: bool = False


@dataclass(frozen=True)
class DeclRec(Decl):
    """A recursive group `rec d1 and d2 and …` or `lam f … = … and lam g … = …` (mutual
    recursion): its members behave as ordinary declarations of the enclosing block."""

    decls: tuple[Decl, ...]


@dataclass(frozen=True)
class Import:
    loc: Loc
    kind: TLiteral["plugin", "import"]
    name: str


@dataclass(frozen=True)
class Module:
    loc: Loc
    imports: tuple[Import, ...]
    decls: tuple[Decl, ...]


Node = Union[Expr, Pattern, Decl, Module]


def children(x: object) -> list[object]:
    """A syntax node's fields (its position left out), or a tuple's items, in source order."""
    if isinstance(x, (tuple, list)):
        return list(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, Loc):
        return [getattr(x, f.name) for f in dataclasses.fields(x) if f.name != "loc"]
    return []


def nodes(root: object) -> Iterator[object]:
    """Every syntax node below root (itself included), in source order."""
    stack = [root]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(children(x)))
