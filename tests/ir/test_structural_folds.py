"""The World's structural folds (tuple, pack, extract and insert: LANGUAGE.md's normal forms),
checked against a reference semantics written here.

The core normalizers are proved over bit-vectors (smt.normalizer_proofs); these folds are not
arithmetic and no specification re-checks them in a program: smt.inline_proof rebuilds its
reference through the same constructors, and a program is built through them before any phase
runs. So a wrong fold (an extract of an insert at another index taking the inserted value, an
insert into a pack off by one) would be invisible to `check`. This test is their check: random
terms over tuples, packs (constant, indexed, expanded or kept), extracts (literal, variable and
multi-indices) and inserts, with free variables of every shape, are built through the World and
evaluated with an evaluator of IR nodes that knows no fold; the value must be what the term
means, computed from the term itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimim.ir.defs import BVar, Def, Extract, Insert, Lit, Pack, Param, Tuple
from verimim.ir.world import EXPAND_LIMIT, World

# A shape: None for a scalar (a Nat), else the shapes of a tuple's elements (never one element:
# `«1; T»` is T).
Shape = Union[None, tuple["Shape", ...]]
# A value: an int, or a tuple of values.
Value = Union[int, tuple["Value", ...]]

BIG = EXPAND_LIMIT + 2  # a pack of this many elements stays a Pack node


@dataclass(frozen=True)
class Term:
    """A term as written: what it means is computed from it (`meaning`), what the World makes
    of it by building it (`build`)."""
    op: str
    args: tuple[object, ...]


def _arity(shape: Shape) -> int:
    return 1 if shape is None else len(shape)


def _homogeneous(shape: Shape) -> bool:
    return shape is not None and len(shape) >= 2 and all(s == shape[0] for s in shape)


def _pack_shape(n: int, elem: Shape) -> Shape:
    return elem if n == 1 else (elem,) * n


def _mpack_shape(dims: tuple[int, ...], depth: int = 0) -> Shape:
    """«a; «b; …; [Idx a, Idx b, …]»»: the shape of `‹i: (a, b, …); i›`."""
    if depth == len(dims):
        return (None,) * len(dims)
    return (_mpack_shape(dims, depth + 1),) * dims[depth]


# ============================================================================ the terms


@st.composite
def index_into(draw: st.DrawFn, shape: Shape) -> tuple[Term, Shape]:
    """An index into a value of `shape` (literal, variable, `0_1` or a pair), and the shape of
    what it selects."""
    options = ["one"]
    if shape is not None and len(shape) >= 2:
        options.append("lit")
        if _homogeneous(shape):
            options.append("var")
        if any(s is not None and len(s) >= 2 for s in shape):
            options.append("pair")
    kind = draw(st.sampled_from(options))
    if kind == "one":
        return Term("ilit", (1, 0)), shape
    assert shape is not None
    n = len(shape)
    if kind == "var":
        return Term("ivar", (n, draw(st.integers(0, n - 1)))), shape[0]
    if kind == "lit":
        i = draw(st.integers(0, n - 1))
        return Term("ilit", (n, i)), shape[i]
    i = draw(st.sampled_from([k for k, s in enumerate(shape) if s is not None and len(s) >= 2]))
    inner = shape[i]
    assert inner is not None
    j = draw(st.integers(0, len(inner) - 1))
    return Term("ipair", ((n, i), (len(inner), j))), inner[j]


@st.composite
def of_shape(draw: st.DrawFn, shape: Shape, depth: int) -> Term:
    """A term of exactly `shape`."""
    kind = draw(st.sampled_from(["param", "build"] if depth > 0 else ["param"]))
    if kind == "param" or shape is None and draw(st.booleans()):
        return Term("param", (shape, draw(_values(shape))))
    if shape is None:
        return Term("lit", (draw(st.integers(0, 5)),))
    if _homogeneous(shape) and draw(st.booleans()):
        return Term("pack", (len(shape), draw(of_shape(shape[0], depth - 1))))
    return Term("tuple", tuple(draw(of_shape(s, depth - 1)) for s in shape))


def _values(shape: Shape) -> st.SearchStrategy[Value]:
    if shape is None:
        return st.integers(0, 9)
    return st.tuples(*(_values(s) for s in shape))


@st.composite
def term(draw: st.DrawFn, depth: int) -> tuple[Term, Shape]:
    small_shapes = st.sampled_from([None, (None, None), (None, None, None), ((None, None), None),
                                    ((None, None), (None, None)), ()])
    if depth == 0:
        kind = draw(st.sampled_from(["lit", "param", "ipack", "mpack"]))
    else:
        kind = draw(st.sampled_from(["tuple", "pack", "ipack", "mpack", "extract", "extract", "insert", "insert",
                                     "param"]))
    if kind == "lit":
        return Term("lit", (draw(st.integers(0, 5)),)), None
    if kind == "param":
        shape = draw(small_shapes)
        return Term("param", (shape, draw(_values(shape)))), shape
    if kind == "ipack":  # ‹i: n; i›, expanded into a tuple unless n is beyond EXPAND_LIMIT
        n = draw(st.sampled_from([2, 3, BIG]))
        return Term("ipack", (n,)), (None,) * n
    if kind == "mpack":  # ‹i: (a, b, …); i›: a pack of a multi-dimensional shape, kept as a Pack
        dims = draw(st.sampled_from([(2, 3), (3, 2), (2, 2, 2)]))
        return Term("mpack", dims), _mpack_shape(dims)
    if kind == "tuple":
        elems = draw(st.lists(term(depth - 1), min_size=0, max_size=3).filter(lambda es: len(es) != 1))
        return Term("tuple", tuple(t for t, _ in elems)), tuple(s for _, s in elems)
    if kind == "pack":
        n = draw(st.sampled_from([0, 1, 2, 3]))
        body, shape = draw(term(depth - 1))
        return Term("pack", (n, body)), _pack_shape(n, shape)
    base, shape = draw(term(depth - 1))
    index, selected = draw(index_into(shape))
    if kind == "extract":
        return Term("extract", (base, index)), selected
    if index.op == "ipair":  # an insert takes one index
        index, selected = Term("ilit", (1, 0)), shape
    value = draw(of_shape(selected, depth - 1))
    return Term("insert", (base, index, value)), shape


# ============================================================================ what a term means


def _env_index(t: Term) -> int:
    """The value a variable index stands for (an index Param's value is drawn with it)."""
    return int(t.args[1])  # type: ignore[call-overload]


def _select(v: Value, index: Term) -> Value:
    if index.op == "ilit" and index.args[0] == 1:
        return v
    assert isinstance(v, tuple)
    if index.op == "ilit":
        return v[int(index.args[1])]  # type: ignore[call-overload]
    if index.op == "ivar":
        return v[_env_index(index)]
    (_, i), (_, j) = index.args  # type: ignore[misc]
    inner = v[i]
    assert isinstance(inner, tuple)
    return inner[j]


def _replace(v: Value, index: Term, new: Value) -> Value:
    if index.op == "ilit" and index.args[0] == 1:
        return new
    assert isinstance(v, tuple)
    i = int(index.args[1]) if index.op == "ilit" else _env_index(index)  # type: ignore[call-overload]
    return v[:i] + (new,) + v[i + 1:]


def _indices(dims: tuple[int, ...], prefix: tuple[int, ...]) -> Value:
    """The value of `‹i: dims; i›` below the indices `prefix`: at the bottom, the index tuple."""
    if len(prefix) == len(dims):
        return prefix
    return tuple(_indices(dims, (*prefix, j)) for j in range(dims[len(prefix)]))


def meaning(t: Term) -> Value:
    op, a = t.op, t.args
    if op == "lit":
        return int(a[0])  # type: ignore[call-overload]
    if op == "param":
        return a[1]  # type: ignore[return-value]
    if op == "ipack":
        return tuple(range(int(a[0])))  # type: ignore[call-overload]
    if op == "mpack":
        return _indices(tuple(int(x) for x in a), ())  # type: ignore[call-overload]
    if op == "tuple":
        return tuple(meaning(e) for e in a)  # type: ignore[arg-type]
    if op == "pack":
        n, body = int(a[0]), meaning(a[1])  # type: ignore[call-overload, arg-type]
        return body if n == 1 else (body,) * n
    if op == "extract":
        return _select(meaning(a[0]), a[1])  # type: ignore[arg-type]
    assert op == "insert"
    return _replace(meaning(a[0]), a[1], meaning(a[2]))  # type: ignore[arg-type]


# ============================================================================ what the World makes


class Builder:
    def __init__(self, w: World) -> None:
        self.w = w
        self.env: dict[int, Value] = {}  # a Param's id → its value

    def type_of_shape(self, shape: Shape) -> Def:
        if shape is None:
            return self.w.nat()
        return self.w.sigma([self.type_of_shape(s) for s in shape])

    def param(self, type_: Def, value: Value) -> Def:
        p = self.w.param(type_, f"p{len(self.env)}")
        self.env[id(p)] = value
        return p

    def index(self, t: Term) -> Def:
        w = self.w
        if t.op == "ilit":
            n, i = t.args
            return w.lit_idx(int(n), int(i))  # type: ignore[call-overload]
        if t.op == "ivar":
            return self.param(w.idx_n(int(t.args[0])), _env_index(t))  # type: ignore[call-overload]
        (n, i), (m, j) = t.args  # type: ignore[misc]
        return w.tuple([w.lit_idx(n, i), w.lit_idx(m, j)])

    def build(self, t: Term) -> Def:
        w, op, a = self.w, t.op, t.args
        if op == "lit":
            return w.lit_nat(int(a[0]))  # type: ignore[call-overload]
        if op == "param":
            return self.param(self.type_of_shape(a[0]), a[1])  # type: ignore[arg-type]
        if op == "ipack":
            return w.pack(w.lit_nat(int(a[0])), w.bvar(0))  # type: ignore[call-overload]
        if op == "mpack":
            return w.pack(w.tuple([w.lit_nat(int(x)) for x in a]), w.bvar(0))  # type: ignore[call-overload]
        if op == "tuple":
            return w.tuple([self.build(e) for e in a])  # type: ignore[arg-type]
        if op == "pack":
            return w.pack(w.lit_nat(int(a[0])), w.shift(self.build(a[1]), 1))  # type: ignore[call-overload, arg-type]
        if op == "extract":
            return w.extract(self.build(a[0]), self.index(a[1]))  # type: ignore[arg-type]
        return w.insert(self.build(a[0]), self.index(a[1]), self.build(a[2]))  # type: ignore[arg-type]

    def _rows(self, body: Def, bound: tuple[Value, ...], dims: tuple[Value, ...], prefix: tuple[int, ...]) -> Value:
        if len(prefix) == len(dims):
            return self.value(body, (prefix, *bound))
        n = dims[len(prefix)]
        assert isinstance(n, int)
        return tuple(self._rows(body, bound, dims, (*prefix, j)) for j in range(n))

    def value(self, d: Def, bound: tuple[Value, ...] = ()) -> Value:
        """What an IR node denotes, node by node (no fold: an Extract selects, an Insert
        replaces, a Pack repeats its body for every index)."""
        if isinstance(d, Lit):
            return d.value
        if isinstance(d, Param):
            return self.env[id(d)]
        if isinstance(d, BVar):
            return bound[d.index]
        if isinstance(d, Tuple):
            return tuple(self.value(e, bound) for e in d.ops)
        if isinstance(d, Pack):
            n = self.value(d.ops[0], bound)
            if isinstance(n, tuple):  # a multi-dimensional shape: its index is the tuple of indices
                return self._rows(d.ops[1], bound, n, ())
            assert isinstance(n, int)
            return tuple(self.value(d.ops[1], (j, *bound)) for j in range(n))
        if isinstance(d, Extract):
            tup, i = self.value(d.ops[0], bound), self.value(d.ops[1], bound)
            if isinstance(i, tuple):  # a multi-index
                for k in i:
                    assert isinstance(tup, tuple) and isinstance(k, int)
                    tup = tup[k]
                return tup
            assert isinstance(tup, tuple) and isinstance(i, int)
            return tup[i]
        if isinstance(d, Insert):
            tup, i, new = (self.value(x, bound) for x in d.ops)
            assert isinstance(tup, tuple) and isinstance(i, int)
            return tup[:i] + (new,) + tup[i + 1:]
        raise AssertionError(f"unexpected node {type(d).__name__} in a structural term")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(term(3))
def test_every_structural_fold_keeps_what_the_term_means(drawn: tuple[Term, Shape]) -> None:
    t, _ = drawn
    b = Builder(World())
    assert b.value(b.build(t)) == meaning(t)


# A few terms that reach each fold for certain (a random run might not draw them).
P2 = Term("param", ((None, None), (4, 5)))
P3 = Term("param", ((None, None, None), (4, 5, 6)))
CASES = {
    "extract of an insert at another literal index": Term("extract", (
        Term("insert", (P2, Term("ilit", (2, 1)), Term("lit", (7,)))), Term("ilit", (2, 0)))),
    "extract of an insert at its own index": Term("extract", (
        Term("insert", (P2, Term("ilit", (2, 1)), Term("lit", (7,)))), Term("ilit", (2, 1)))),
    "insert into a constant pack": Term("insert", (
        Term("pack", (4, Term("param", (None, 3)))), Term("ilit", (4, 2)), Term("lit", (7,)))),
    "insert into a tuple": Term("insert", (
        Term("tuple", (Term("lit", (1,)), Term("lit", (2,)), Term("lit", (3,)))), Term("ilit", (3, 0)),
        Term("lit", (9,)))),
    "extract from a kept pack": Term("extract", (Term("ipack", (BIG,)), Term("ilit", (BIG, BIG - 3)))),
    "extract by a variable index": Term("extract", (P3, Term("ivar", (3, 2)))),
    "extract by a pair of indices": Term("extract", (
        Term("tuple", (Term("lit", (1,)), Term("tuple", (Term("lit", (2,)), Term("lit", (3,)))))),
        Term("ipair", ((2, 1), (2, 0))))),
    "extract by a pair of equal indices (a pack)": Term("extract", (
        Term("tuple", (Term("tuple", (Term("lit", (2,)), Term("lit", (3,)))), Term("lit", (1,)))),
        Term("ipair", ((2, 0), (2, 0))))),
    "extract by 0_1": Term("extract", (P3, Term("ilit", (1, 0)))),
    # `‹i: (2, 3); i›#1_2` was `tt`: the body opened with 1_2 for the whole index pair
    "a row of a multi-dimensional pack": Term("extract", (Term("mpack", (2, 3)), Term("ilit", (2, 1)))),
    "a row by a variable index": Term("extract", (Term("mpack", (2, 2, 2)), Term("ivar", (2, 1)))),
    "a cell of a multi-dimensional pack": Term("extract", (Term("mpack", (2, 3)), Term("ipair", ((2, 1), (3, 2))))),
    "insert at 0_1": Term("insert", (P3, Term("ilit", (1, 0)), Term("param", ((None, None, None), (1, 2, 3))))),
}


def test_each_structural_fold_keeps_what_the_term_means() -> None:
    for name, t in CASES.items():
        b = Builder(World())
        assert b.value(b.build(t)) == meaning(t), name
