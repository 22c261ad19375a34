"""Tests of verimim.ir.world: hash-consing, locally nameless binders, the normal forms of
LANGUAGE.md, `open`/`shift`/`abstract`/`zonk`, and `type_of`."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimim.ir.defs import App, Arr, Def, Extract, Lam, Pack, Param, Sigma, Tuple
from verimim.ir.world import EXPAND_LIMIT, IRError, World


@pytest.fixture
def w() -> World:
    return World()


def I(w: World, bits: int) -> Def:  # noqa: E743 - I8/I16/... as in Mim
    return w.idx_n(2**bits)


# ============================================================================= hash-consing


def test_structurally_equal_nodes_are_identical(w: World) -> None:
    n = w.lit_nat
    assert w.nat() is w.nat()
    assert w.idx_n(4) is w.idx(n(4))
    assert w.lit_idx(4, 3) is w.lit(w.idx_n(4), 3)
    assert w.sigma([w.nat(), w.idx_n(4)]) is w.sigma([w.nat(), w.idx_n(4)])
    assert w.tuple([n(1), n(2)]) is w.tuple([n(1), n(2)])
    assert w.pi(w.nat(), w.idx_n(3)) is w.pi(w.nat(), w.idx_n(3))
    assert w.arr(w.top(w.nat()), I(w, 8)) is w.arr(w.top(w.nat()), I(w, 8))
    assert w.star() is w.type_u(0)
    ax = w.axiom("t.f", w.pi(w.nat(), w.nat()))
    assert w.app(ax, n(3)) is w.app(ax, n(3))


def test_distinct_nodes_stay_distinct(w: World) -> None:
    assert w.lit_nat(1) is not w.lit_idx(2, 1)  # same value, other type
    assert w.lit_idx(4, 1) is not w.lit_idx(8, 1)
    assert w.pi(w.nat(), w.nat()) is not w.pi(w.nat(), w.nat(), implicit=True)
    assert w.sigma([w.nat(), w.bool_t()]) is not w.sigma([w.bool_t(), w.nat()])
    assert w.axiom("a.x", w.nat()) is not w.axiom("a.y", w.nat())
    assert w.type_u(0) is not w.type_u(1)


def test_debug_names_do_not_take_part_in_identity(w: World) -> None:
    a = w.pi(w.nat(), w.nat(), names=("x",))
    b = w.pi(w.nat(), w.nat(), names=("y",))
    assert a is b
    assert a.names == ("x",)  # the first creation keeps its names
    s1 = w.sigma([w.nat(), w.bool_t()], names=("a", "b"))
    s2 = w.sigma([w.nat(), w.bool_t()], names=("c", "d"))
    assert s1 is s2


def test_alpha_equivalent_binders_are_identical(w: World) -> None:
    """`(x: Nat) → Idx x` and `(y: Nat) → Idx y` built with different Params are one node."""
    p1, p2 = w.param(w.nat(), "x"), w.param(w.nat(), "y")
    pi1 = w.pi(w.nat(), w.abstract(w.idx(p1), p1))
    pi2 = w.pi(w.nat(), w.abstract(w.idx(p2), p2))
    assert pi1 is pi2
    assert pi1 is w.pi(w.nat(), w.idx(w.bvar(0)))
    # λ(x: Nat). (x, 1) with two different params
    lam1 = w.lam(w.pi(w.nat(), w.sigma([w.nat(), w.nat()])), w.abstract(w.tuple([p1, w.lit_nat(1)]), p1))
    lam2 = w.lam(w.pi(w.nat(), w.sigma([w.nat(), w.nat()])), w.abstract(w.tuple([p2, w.lit_nat(1)]), p2))
    assert lam1 is lam2
    # nested binders: (x: Nat) → (y: Idx x) → Idx x
    def nested(px: Param, py: Param) -> Def:
        inner = w.pi(w.idx(px), w.abstract(w.idx(px), py))
        return w.pi(w.nat(), w.abstract(inner, px))
    q1, q2 = w.param(w.nat(), "a"), w.param(w.nat(), "b")
    r1, r2 = w.param(w.idx(q1), "c"), w.param(w.idx(q2), "d")
    assert nested(q1, r1) is nested(q2, r2)
    assert nested(q1, r1) is w.pi(w.nat(), w.pi(w.idx(w.bvar(0)), w.idx(w.bvar(1))))


def test_mutables_are_nominal(w: World) -> None:
    assert w.param(w.nat(), "x") is not w.param(w.nat(), "x")
    assert w.hole(w.nat(), "n") is not w.hole(w.nat(), "n")
    pi = w.cn(w.nat())
    m1, m2 = w.mut_lam(pi, "k", "con"), w.mut_lam(pi, "k", "con")
    assert m1 is not m2
    assert w.var(m1) is w.var(m1) and w.var(m1) is not w.var(m2)


# ============================================================================= normal forms


def test_array_of_one_is_its_element(w: World) -> None:
    assert w.arr(w.lit_nat(1), I(w, 32)) is I(w, 32)


def test_sigma_of_one_is_its_field(w: World) -> None:
    assert w.sigma([I(w, 32)]) is I(w, 32)


def test_tuple_of_one_is_its_element(w: World) -> None:
    v = w.lit_idx(4, 2)
    assert w.tuple([v]) is v


def test_extract_with_an_idx1_index_is_the_tuple(w: World) -> None:
    p = w.param(I(w, 32), "x")
    assert w.extract(p, w.lit_idx(1, 0)) is p
    assert w.extract(w.tuple([w.nat()]), w.lit_idx(1, 0)) is w.nat()


def test_empty_array_is_unit_type(w: World) -> None:
    unit_t = w.arr(w.lit_nat(0), I(w, 32))
    assert unit_t is w.sigma([])
    assert unit_t is w.unit_t()
    assert isinstance(unit_t, Sigma) and unit_t.ops == ()


def test_empty_pack_is_unit(w: World) -> None:
    u = w.pack(w.lit_nat(0), w.lit_nat(5))
    assert u is w.tuple([])
    assert u is w.unit()
    assert isinstance(u, Tuple) and u.ops == ()
    assert w.type_of(u) is w.unit_t()


def test_pack_of_one_is_its_body(w: World) -> None:
    assert w.pack(w.lit_nat(1), w.lit_nat(5)) is w.lit_nat(5)
    # the index of a one-element pack is 0_1
    assert w.pack(w.lit_nat(1), w.bvar(0)) is w.lit_idx(1, 0)


@pytest.mark.parametrize("n", [2, 3, 7])
def test_sigma_of_equal_types_is_an_array(w: World, n: int) -> None:
    s = w.sigma([I(w, 16)] * n)
    assert isinstance(s, Arr)
    assert s is w.arr(w.lit_nat(n), I(w, 16))
    assert s.shape is w.lit_nat(n)


def test_sigma_of_different_types_stays(w: World) -> None:
    s = w.sigma([I(w, 8), I(w, 32)])
    assert isinstance(s, Sigma) and len(s.ops) == 2


def test_dependent_sigma_of_equal_fields_stays_a_sigma(w: World) -> None:
    # [Idx (self#0_2)…] mentions the sigma's own value: not an array
    f = w.idx(w.extract(w.bvar(0), w.lit_idx(2, 0)))
    s = w.sigma([f, f])
    assert isinstance(s, Sigma)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_tuple_of_equal_values_is_a_pack(w: World, n: int) -> None:
    v = w.lit_idx(2**32, 10)
    t = w.tuple([v] * n)
    assert isinstance(t, Pack)
    assert t is w.pack(w.lit_nat(n), v)
    assert w.type_of(t) is w.arr(w.lit_nat(n), I(w, 32))


def test_tuple_of_equal_open_values_shifts_into_the_pack(w: World) -> None:
    """A tuple of equal values that mention an outer binder: the pack body is shifted."""
    t = w.tuple([w.bvar(0), w.bvar(0)])
    assert isinstance(t, Pack)
    assert t.body is w.bvar(1)
    assert w.open(t, w.lit_nat(3)) is w.pack(w.lit_nat(2), w.lit_nat(3))


def test_extract_of_a_literal_tuple(w: World) -> None:
    f, t = w.lit_nat(10), w.lit_nat(20)
    assert w.extract(w.tuple([f, t]), w.lit_bool(True)) is t  # (f, t)#tt = t
    assert w.extract(w.tuple([f, t]), w.lit_bool(False)) is f
    tup = w.tuple([w.nat(), w.bool_t(), I(w, 8)])
    assert w.extract_n(tup, 3, 2) is I(w, 8)


def test_extract_of_a_tuple_with_symbolic_index_stays(w: World) -> None:
    c = w.param(w.bool_t(), "c")
    e = w.extract(w.tuple([w.lit_nat(1), w.lit_nat(2)]), c)
    assert isinstance(e, Extract)
    assert w.type_of(e) is w.nat()


def test_extract_of_a_literal_tuple_out_of_range_is_an_error(w: World) -> None:
    with pytest.raises(IRError):
        w.extract(w.tuple([w.lit_nat(1), w.lit_nat(2)]), w.lit_idx(3, 2))


def test_extract_at_an_index_of_unknown_range_is_left_for_the_run(w: World) -> None:
    # `core.idx_unsafe 9` is a literal of `Idx ⊤`: checked against the tuple when it runs (E-OOB)
    unsafe = w.lit(w.idx(w.top(w.nat())), 9)
    e = w.extract(w.tuple([w.lit_nat(1), w.lit_nat(2)]), unsafe)
    assert isinstance(e, Extract) and e.index is unsafe


def test_extract_of_a_pack(w: World) -> None:
    v = w.lit_nat(9)
    n = w.param(w.nat(), "n")
    i = w.param(w.idx(n), "i")
    assert w.extract(w.pack(n, v), i) is v  # ‹n; 9›#i = 9
    ident = w.pack(n, w.bvar(0))  # ‹j: n; j›
    assert isinstance(ident, Pack)
    assert w.extract(ident, i) is i  # ‹j: n; j›#i = i
    # a literal-shape pack with an index body has been expanded into a tuple
    assert w.pack(w.lit_nat(3), w.bvar(0)) is w.tuple([w.lit_idx(3, k) for k in range(3)])
    assert w.extract(w.pack(w.lit_nat(3), w.bvar(0)), w.lit_idx(3, 1)) is w.lit_idx(3, 1)


def test_insert_normalizes(w: World) -> None:
    t = w.tuple([w.lit_nat(1), w.lit_nat(2)])
    assert w.insert(t, w.lit_idx(2, 0), w.lit_nat(2)) is w.pack(w.lit_nat(2), w.lit_nat(2))
    p = w.pack(w.lit_nat(3), w.lit_nat(0))
    assert w.insert(p, w.lit_idx(3, 1), w.lit_nat(5)) is w.tuple([w.lit_nat(0), w.lit_nat(5), w.lit_nat(0)])


def test_beta_reduction_of_an_immutable_lam(w: World) -> None:
    nat = w.nat()
    x = w.param(nat, "x")
    pair = w.lam(w.pi(nat, w.sigma([nat, nat])), w.abstract(w.tuple([x, w.lit_nat(1)]), x))
    assert isinstance(pair, Lam)
    assert w.app(pair, w.lit_nat(5)) is w.tuple([w.lit_nat(5), w.lit_nat(1)])
    assert w.app(pair, w.lit_nat(1)) is w.pack(w.lit_nat(2), w.lit_nat(1))
    ident = w.lam(w.pi(nat, nat), w.bvar(0))
    y = w.param(nat, "y")
    assert w.app(ident, y) is y
    # curried: λ(a: Nat). λ(b: Nat). (b, a)
    a, b = w.param(nat, "a"), w.param(nat, "b")
    inner_pi = w.pi(nat, w.sigma([nat, nat]))
    inner = w.lam(inner_pi, w.abstract(w.tuple([b, a]), b))
    outer = w.lam(w.pi(nat, inner_pi), w.abstract(inner, a))
    assert w.apps(outer, w.lit_nat(1), w.lit_nat(2)) is w.tuple([w.lit_nat(2), w.lit_nat(1)])


def test_application_of_a_non_lam_is_kept(w: World) -> None:
    f = w.axiom("t.f", w.pi(w.nat(), w.nat()))
    a = w.app(f, w.lit_nat(1))
    assert isinstance(a, App) and a.head is f and a.depth == 1 and a.args() == [w.lit_nat(1)]


def test_dependent_array_with_literal_shape_is_a_sigma(w: World) -> None:
    types = w.tuple([w.nat(), w.bool_t(), I(w, 8)])
    dep = w.arr(w.lit_nat(3), w.extract(w.shift(types, 1), w.bvar(0)))  # «i: 3; (Nat, Bool, I8)#i»
    assert dep is w.sigma([w.nat(), w.bool_t(), I(w, 8)])
    # «i: 4; Idx 4 extracted by i from equal types» collapses all the way to an array
    same = w.arr(w.lit_nat(4), w.extract(w.pack(w.lit_nat(4), w.nat()), w.bvar(0)))
    assert same is w.arr(w.lit_nat(4), w.nat())


def test_dependent_array_with_symbolic_shape_stays(w: World) -> None:
    n = w.param(w.nat(), "n")
    ts = w.param(w.arr(n, w.star()), "Ts")
    dep = w.arr(n, w.extract(w.shift(ts, 1), w.bvar(0)))
    assert isinstance(dep, Arr)
    # …until the shape becomes a literal
    closed = w.abstract(dep, n, w.lit_nat(2))
    assert isinstance(closed, Sigma) and len(closed.ops) == 2


def test_large_dependent_array_is_not_expanded(w: World) -> None:
    big = w.pack(w.lit_nat(EXPAND_LIMIT + 1), w.bvar(0))
    assert isinstance(big, Pack)


def test_multi_dimensional_shapes(w: World) -> None:
    n = w.lit_nat
    t = I(w, 32)
    assert w.arr(w.tuple([n(2), n(3)]), t) is w.arr(n(2), w.arr(n(3), t))
    assert w.arr(w.tuple([n(2), n(3), n(4)]), t) is w.arr(n(2), w.arr(n(3), w.arr(n(4), t)))
    assert w.arr(w.tuple([n(3), n(1)]), t) is w.arr(n(3), t)


def test_multi_dimensional_shape_with_equal_dimensions(w: World) -> None:
    n = w.lit_nat
    t = I(w, 32)
    assert w.arr(w.tuple([n(2), n(2)]), t) is w.arr(n(2), w.arr(n(2), t))


# ============================================================================= locally nameless operations


def test_abstract_then_open_round_trips(w: World) -> None:
    p = w.param(w.nat(), "n")
    q = w.param(w.nat(), "m")
    terms = [
        w.idx(p),
        w.tuple([p, w.lit_nat(1)]),
        w.pi(w.idx(p), w.idx(p)),  # under a binder: the occurrence in the codomain is BVar(1)
        w.arr(p, w.idx(p)),
        w.sigma([w.idx(p), w.nat()]),
        w.lit_nat(3),
    ]
    for d in terms:
        a = w.abstract(d, p)
        assert not a.has_param
        assert w.open(a, p) is d
        assert w.open(a, q) is w.abstract(d, p, q)
    assert w.abstract(w.idx(p), p) is w.idx(w.bvar(0))
    assert w.abstract(w.pi(w.idx(p), w.idx(p)), p) is w.pi(w.idx(w.bvar(0)), w.idx(w.bvar(1)))


def test_open_instantiates_the_outermost_dangling_index(w: World) -> None:
    body = w.pi(w.nat(), w.idx(w.bvar(1)))  # (x: Nat) → Idx <outer>
    assert w.open(body, w.lit_nat(5)) is w.pi(w.nat(), w.idx_n(5))
    # a free index further out drops by one
    assert w.open(w.tuple([w.bvar(0), w.bvar(2)]), w.lit_nat(1)) is w.tuple([w.lit_nat(1), w.bvar(1)])
    # a closed term is returned as is
    closed = w.sigma([w.nat(), w.bool_t()])
    assert w.open(closed, w.lit_nat(9)) is closed


def test_open_shifts_an_open_value_under_binders(w: World) -> None:
    body = w.pi(w.nat(), w.idx(w.bvar(1)))
    assert w.open(body, w.bvar(3)) is w.pi(w.nat(), w.idx(w.bvar(4)))


def test_shift(w: World) -> None:
    assert w.shift(w.bvar(0), 2) is w.bvar(2)
    d = w.tuple([w.bvar(0), w.bvar(1), w.lit_nat(3)])
    assert w.shift(d, 1) is w.tuple([w.bvar(1), w.bvar(2), w.lit_nat(3)])
    assert w.shift(d, 1, cutoff=1) is w.tuple([w.bvar(0), w.bvar(2), w.lit_nat(3)])
    assert w.shift(w.shift(d, 3), -3) is d
    # bound occurrences are not shifted
    pi = w.pi(w.nat(), w.tuple([w.bvar(0), w.bvar(1)]))
    assert w.shift(pi, 1) is w.pi(w.nat(), w.tuple([w.bvar(0), w.bvar(2)]))
    closed = w.idx_n(3)
    assert w.shift(closed, 5) is closed
    with pytest.raises(IRError):
        w.shift(w.bvar(0), -1)


def test_bvd_tracks_dangling_indices(w: World) -> None:
    assert w.bvar(2).bvd == 3
    assert w.pi(w.nat(), w.bvar(0)).bvd == 0
    assert w.pi(w.nat(), w.bvar(1)).bvd == 1
    assert w.nat().closed and not w.bvar(0).closed


def test_abstract_with_a_replacement(w: World) -> None:
    p = w.param(w.nat(), "n")
    d = w.arr(p, w.idx(p))
    assert w.abstract(d, p, w.lit_nat(3)) is w.arr(w.lit_nat(3), w.idx_n(3))
    assert w.abstract(d, p, w.lit_nat(1)) is w.idx_n(1)  # re-normalized on the way


# ============================================================================= zonk


def test_zonk_resolves_holes_and_renormalizes(w: World) -> None:
    h = w.hole(w.nat(), "n")
    t = w.arr(h, I(w, 32))
    assert t.has_hole and isinstance(t, Arr)
    assert w.zonk(t) is t  # unsolved: unchanged
    h.value = w.lit_nat(1)
    assert w.zonk(t) is I(w, 32)
    h2 = w.hole(w.nat(), "m")
    t2 = w.arr(h2, I(w, 32))
    h2.value = w.lit_nat(4)
    z = w.zonk(t2)
    assert z is w.arr(w.lit_nat(4), I(w, 32)) and not z.has_hole


def test_zonk_follows_chains_of_holes(w: World) -> None:
    a, b = w.hole(w.nat(), "a"), w.hole(w.nat(), "b")
    a.value = b
    b.value = w.lit_nat(3)
    assert w.zonk(w.idx(a)) is w.idx_n(3)
    assert a.value is w.lit_nat(3)  # path compression


def test_zonk_folds_extracts_and_applications(w: World) -> None:
    c = w.hole(w.bool_t(), "c")
    e = w.extract(w.tuple([w.lit_nat(10), w.lit_nat(20)]), c)
    assert isinstance(e, Extract)
    c.value = w.lit_bool(True)
    assert w.zonk(e) is w.lit_nat(20)
    x = w.hole(w.nat(), "x")
    lam = w.lam(w.pi(w.nat(), w.nat()), w.bvar(0))
    f = w.hole(w.pi(w.nat(), w.nat()), "f")
    app = w.app(f, x)
    f.value, x.value = lam, w.lit_nat(8)
    assert w.zonk(app) is w.lit_nat(8)  # β after zonking


def test_zonk_of_a_hole_free_term_is_itself(w: World) -> None:
    d = w.sigma([w.nat(), w.bool_t()])
    assert w.zonk(d) is d


# ============================================================================= type_of


def test_type_of_base_nodes(w: World) -> None:
    assert w.type_of(w.lit_nat(3)) is w.nat()
    assert w.type_of(w.lit_idx(8, 3)) is w.idx_n(8)
    assert w.type_of(w.nat()) is w.star()
    assert w.type_of(w.idx_n(4)) is w.star()
    assert w.type_of(w.star()) is w.type_u(1)
    assert w.type_of(w.sigma([w.nat(), w.bool_t()])) is w.star()
    assert w.type_of(w.pi(w.nat(), w.star())) is w.type_u(1)


def test_type_of_tuples_and_packs(w: World) -> None:
    t = w.tuple([w.lit_nat(1), w.lit_idx(4, 2), w.lit_bool(True)])
    assert w.type_of(t) is w.sigma([w.nat(), w.idx_n(4), w.bool_t()])
    assert w.type_of(w.pack(w.lit_nat(3), w.lit_nat(1))) is w.arr(w.lit_nat(3), w.nat())
    assert w.type_of(w.tuple([w.lit_nat(1), w.lit_nat(2)])) is w.arr(w.lit_nat(2), w.nat())
    n = w.param(w.nat(), "n")
    ident = w.pack(n, w.bvar(0))  # ‹i: n; i›: «n; Idx n»
    assert w.type_of(ident) is w.arr(n, w.idx(n))
    assert w.type_of(w.tuple([])) is w.unit_t()


def test_type_of_extracts(w: World) -> None:
    s = w.sigma([w.nat(), I(w, 8)])
    x = w.param(s, "x")
    assert w.type_of(w.extract_n(x, 2, 1)) is I(w, 8)
    # dependent sigma [n: Nat, Idx n]: x#1 has type Idx (x#0)
    dep = w.sigma([w.nat(), w.idx(w.extract_n(w.bvar(0), 2, 0))])
    y = w.param(dep, "y")
    assert w.type_of(w.extract_n(y, 2, 1)) is w.idx(w.extract_n(y, 2, 0))
    # arrays: any index
    n = w.param(w.nat(), "n")
    a = w.param(w.arr(n, I(w, 16)), "a")
    i = w.param(w.idx(n), "i")
    assert w.type_of(w.extract(a, i)) is I(w, 16)


def test_type_of_applications(w: World) -> None:
    f = w.axiom("t.f", w.pi(w.nat(), w.idx(w.bvar(0))))  # (n: Nat) → Idx n
    assert w.type_of(w.app(f, w.lit_nat(5))) is w.idx_n(5)
    g = w.axiom("t.g", w.pi(w.nat(), w.pi(w.bool_t(), w.idx(w.bvar(1)))))  # (n: Nat) → Bool → Idx n
    b = w.param(w.bool_t(), "b")
    assert w.type_of(w.apps(g, w.lit_nat(7), b)) is w.idx_n(7)
    lam = w.lam(w.pi(w.nat(), w.nat()), w.bvar(0))
    assert w.type_of(lam) is lam.pi
    with pytest.raises(IRError):
        w.type_of(w.app(w.axiom("t.c", w.nat()), w.lit_nat(1)))


def test_type_of_an_open_term_is_an_error(w: World) -> None:
    with pytest.raises(IRError):
        w.type_of(w.bvar(0))


# ============================================================================= properties


Desc = Any  # a nested tuple describing a node


def _types() -> st.SearchStrategy[Desc]:
    base = st.one_of(st.just(("nat",)), st.integers(1, 2**64).map(lambda n: ("idx", n)))
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.lists(inner, min_size=0, max_size=4).map(lambda fs: ("sigma", tuple(fs))),
            st.tuples(st.integers(0, 5), inner).map(lambda a: ("arr", a[0], a[1])),
        ),
        max_leaves=12,
    )


def _values() -> st.SearchStrategy[Desc]:
    base = st.one_of(
        st.integers(0, 2**70).map(lambda v: ("nat", v)),
        st.integers(1, 2**64).flatmap(lambda n: st.integers(0, min(n - 1, 2**20)).map(lambda v: ("idx", n, v))),
    )
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.lists(inner, min_size=0, max_size=4).map(lambda es: ("tuple", tuple(es))),
            st.tuples(st.integers(0, 5), inner).map(lambda a: ("pack", a[0], a[1])),
        ),
        max_leaves=12,
    )


def build_type(w: World, d: Desc) -> Def:
    tag = d[0]
    if tag == "nat":
        return w.nat()
    if tag == "idx":
        return w.idx_n(d[1])
    if tag == "sigma":
        return w.sigma([build_type(w, f) for f in d[1]])
    assert tag == "arr"
    return w.arr(w.lit_nat(d[1]), build_type(w, d[2]))


def build_value(w: World, d: Desc) -> Def:
    tag = d[0]
    if tag == "nat":
        return w.lit_nat(d[1])
    if tag == "idx":
        return w.lit_idx(d[1], d[2])
    if tag == "tuple":
        return w.tuple([build_value(w, e) for e in d[1]])
    assert tag == "pack"
    return w.pack(w.lit_nat(d[1]), build_value(w, d[2]))


def type_desc_of(d: Desc) -> Desc:
    """The type of a value description, as a type description."""
    tag = d[0]
    if tag == "nat":
        return ("nat",)
    if tag == "idx":
        return ("idx", d[1])
    if tag == "tuple":
        return ("sigma", tuple(type_desc_of(e) for e in d[1]))
    return ("arr", d[1], type_desc_of(d[2]))


_PROP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROP
@given(_types())
def test_property_types_are_hash_consed(d: Desc) -> None:
    w = World()
    t1 = build_type(w, d)
    size = w.num_nodes
    t2 = build_type(w, d)
    assert t1 is t2
    assert w.num_nodes == size  # the second build creates nothing
    assert w.type_of(t1) is w.star()
    assert t1.closed and not t1.has_hole and not t1.has_param


@_PROP
@given(_values())
def test_property_values_are_hash_consed_and_typed_stably(d: Desc) -> None:
    w = World()
    v1 = build_value(w, d)
    v2 = build_value(w, d)
    assert v1 is v2
    t = w.type_of(v1)
    assert t is w.type_of(v2)
    # the type of a value is the normalized type of its description: normal forms of values and
    # types agree (tuple of equal values ↔ sigma of equal types, pack ↔ array, arity 0/1)
    assert t is build_type(w, type_desc_of(d))
    # a second World gives a structurally identical result (same printed form)
    w2 = World()
    assert repr(build_value(w2, d)) == repr(v1)
    assert repr(w2.type_of(build_value(w2, d))) == repr(t)


@_PROP
@given(st.lists(_values(), min_size=2, max_size=5), st.data())
def test_property_extract_of_a_built_tuple(elems: list[Desc], data: st.DataObject) -> None:
    w = World()
    tup = build_value(w, ("tuple", tuple(elems)))
    n = len(elems)
    i = data.draw(st.integers(0, n - 1))
    e = w.extract(tup, w.lit_idx(n, i))
    assert e is build_value(w, elems[i])
    assert w.type_of(e) is w.extract_type(w.type_of(tup), tup, w.lit_idx(n, i))
    assert w.type_of(e) is build_type(w, type_desc_of(elems[i]))


@_PROP
@given(_types(), _types())
def test_property_abstract_open_round_trip(a: Desc, b: Desc) -> None:
    w = World()
    ta, tb = build_type(w, a), build_type(w, b)
    p = w.param(w.star(), "T")
    d = w.pi(w.sigma([p, ta]), w.sigma([tb, p]))
    closed = w.abstract(d, p)
    assert not closed.has_param
    assert w.open(closed, p) is d
    assert w.open(closed, ta) is w.pi(w.sigma([ta, ta]), w.sigma([tb, ta]))
    q = w.param(w.star(), "U")
    assert w.abstract(w.open(closed, q), q) is closed  # alpha-equivalence
