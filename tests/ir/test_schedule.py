"""Tests of verimim.ir.schedule: the one order in which a body's operations run (operands first,
left to right, callee before argument; nothing undemanded), cut cycles, lazy `known`, and the
agreement of the interpreter, the kernel verifier and the spec replay with it."""
from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verimim.frontend.loader import load_text
from verimim.interp.machine import find_main
from verimim.interp.observe import observe
from verimim.ir.defs import App, Axiom, Def, Lit, MutLam
from verimim.ir import schedule as schedule_module
from verimim.ir.schedule import Scopes, activation, immediate_dominators, jump_roots, schedule
from verimim.ir.world import World
from verimim.printer import show

PROGRAM = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m1, p) = mem.malloc (I32, 0) (m0, 4);
    let (m2, q) = mem.malloc (I32, 0) (m1, 4);
    let unused = mem.store (m2, q, 9I32);
    let m3 = mem.store (m2, p, argc);
    let (m4, v) = mem.load (m3, p);
    let m5 = mem.free (m4, p);
    let m6 = mem.free (m5, q);
    return (m6, v);
"""


def effects(nodes: list[Def]) -> list[str]:
    return [d.head.annex for d in nodes
            if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith("mem.") and d.depth == 2]


def leaf(d: Def) -> bool:
    return isinstance(d, (Lit, Axiom))


def test_a_body_runs_operands_first_along_its_tokens_and_skips_what_is_not_demanded() -> None:
    w, _ = load_text(PROGRAM)
    main = find_main(w)
    order = activation(main, Scopes(), leaf, lambda d: () if isinstance(d, MutLam) else d.ops)
    # the store on `unused` never reaches the jump: it is not scheduled (SEMANTICS.md)
    assert effects(order) == ["mem.malloc", "mem.malloc", "mem.store", "mem.load", "mem.free", "mem.free"]
    # and the interpreter, which runs that schedule, agrees: q's block is never written
    obs = observe(w, ["prog", "x"])
    assert obs.result == ("ok", 2) and obs.heap == (bytes(4), (2).to_bytes(4, "little"))


def test_callee_before_argument_and_left_to_right() -> None:
    w = World()
    a, b, c = (w.lit_nat(n) for n in (1, 2, 3))
    t = w.tuple([a, b])
    roots = [t, c]
    order = list(schedule(roots, lambda d: False, lambda d: d.ops if d in (t,) else ()))
    assert order.index(a) < order.index(b) < order.index(t) < order.index(c)


CAPTURING_CALLEE = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m0, p) = mem.malloc (I32, 0) (m0, 4);
    let (m0, q) = mem.malloc (I32, 0) (m0, 4);
    let x = mem.store (m0, p, 1I32);
    let g = mem.store (m0, q, 2I32);
    con fin (a: mem.M 0, b: mem.M 0) =
        let (m, v) = mem.load (g, q);
        let m = mem.free (mem.free (m, p), q);
        return (m, v);
    fin (x, g);
"""


def test_a_closure_the_jump_only_names_is_made_last_and_demands_nothing() -> None:
    # `fin` (the callee) captures the store g of its argument (x, g): making it computes nothing,
    # so x runs before g, as the code generators and upstream's emitter (a block's label, the
    # arguments left to right) and the kernel verifier (a continuation is a value) run them. The
    # schedule made the closure first, with its captures: g before x.
    w, _ = load_text(CAPTURING_CALLEE)
    main = find_main(w)
    scopes = Scopes()
    order = activation(main, scopes, leaf, lambda d: scopes.avail(d, leaf).values() if isinstance(d, MutLam) else d.ops)
    stores = [d for d in order if effects([d]) == ["mem.store"]]
    assert [show(d.arg.ops[2]) for d in stores] == ["1I32", "2I32"]
    assert isinstance(order[-1], MutLam) and order[-1].name == "fin"  # made after what it captures
    # and the interpreter runs that order: fin's load reads 2 (a closure a direct-style call
    # enters is still made before the call, after what it captures: valid/barriers_around_a_call_*)
    assert observe(w, ["prog"]).result == ("ok", 2)


def test_jump_roots_of_a_jump_and_of_a_value() -> None:
    w, _ = load_text(PROGRAM)
    body = find_main(w).body
    assert isinstance(body, App)
    assert jump_roots(body) == [body.callee, body.arg]
    lit = w.lit_nat(3)
    assert jump_roots(lit) == [lit]


def test_a_cycle_is_cut_where_it_closes() -> None:
    w = World()
    x, y = w.lit_nat(1), w.lit_nat(2)
    edges = {x.gid: [y], y.gid: [x]}  # closures that capture each other
    order = list(schedule([x], lambda d: False, lambda d: edges[d.gid]))
    assert order == [y, x]


def test_known_is_asked_when_a_node_is_reached_so_a_caller_may_compute_while_it_iterates() -> None:
    w = World()
    a, b = w.lit_nat(1), w.lit_nat(2)
    shared = w.tuple([a, b])
    left, right = w.tuple([shared, a]), w.tuple([shared, b])
    have: set[int] = set()
    seen = []
    for d in schedule([left, right], lambda d: d.gid in have, lambda d: d.ops):
        seen.append(d)
        have.add(d.gid)
        if d is left:
            have.add(right.gid)  # computed as a side effect of computing `left`
    assert right not in seen and seen[-1] is left


TWO_CALLS = """
plugin core;
plugin mem;

fun helper (m0: mem.M 0, p: mem.Ptr0 I32): [mem.M 0, I32] =
    let m0 = mem.store (m0, p, 5I32);
    return (m0, 0I32);

fun second (m0: mem.M 0): [mem.M 0, I32] = return (m0, 1I32);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m0, p) = mem.malloc (I32, 0) (m0, 4);
    ret (m0, junk) = helper $ (m0, p);
    ret (m0, junk2) = second $ m0;
    let (m0, v) = mem.load (m0, p);
    let m0 = mem.free (m0, p);
    return (m0, v);
"""


def _muts(w: World) -> dict[str, MutLam]:
    return {m.name or "": m for m in w.muts}


def test_a_continuation_only_one_continuation_names_is_made_by_it() -> None:
    # ret_2 (after `second`) is named only by ret_1 (after `helper`) and uses only main's values:
    # ret_1 makes its closure, so ret_2 captures what ret_1 computed (upstream's dominance);
    # ret_1, named only by main's own body, stays main's.
    w, _ = load_text(TWO_CALLS)
    main = find_main(w)
    rets = sorted((m for m in w.muts if (m.name or "").startswith("ret")), key=lambda m: m.gid)
    assert len(rets) == 2
    first, then = rets
    scopes = Scopes()
    assert scopes.creator(first) is main
    assert scopes.creator(then) is first
    assert then in scopes.nested(first) and then not in scopes.local_muts(first)
    assert observe(w, ["prog"]).result == ("ok", 5)


def test_the_scopes_of_one_world_share_its_nesting_but_each_keeps_its_captures(monkeypatch: Any) -> None:
    # The nesting analyses depend on the World's nodes alone: a second Scopes of the same World
    # answers from what the first computed (no body is scanned again). What a closure captures
    # depends on the caller's leaves as well: each Scopes keeps its own.
    w, _ = load_text(TWO_CALLS)
    first, then = sorted((m for m in w.muts if (m.name or "").startswith("ret")), key=lambda m: m.gid)
    a = Scopes(w)
    assert a.creator(then) is first
    captured = a.avail(then, leaf)
    assert captured  # the pointer main allocated, at least

    def no_scan(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a body scanned again")

    monkeypatch.setattr(schedule_module, "scan_mut", no_scan)
    monkeypatch.setattr(schedule_module, "free_muts", no_scan)
    b = Scopes(w)
    assert b.creator(then) is first and b.nested(first) == a.nested(first)
    with pytest.raises(AssertionError, match="scanned again"):
        Scopes().creator(then)  # a Scopes of no World starts from nothing
    # every node a leaf but the mutables: nothing is captured, whatever `a` found
    assert not [d for d in b.avail(then, lambda d: not isinstance(d, MutLam)).values() if not isinstance(d, MutLam)]
    assert a.avail(then, leaf) == captured


def test_continuations_that_name_each_other_are_made_by_their_dominators_in_any_order() -> None:
    # pb and q name each other, and pb is also named by `more`: every way to pb passes through
    # more, every way to q through pb, so more makes pb's closures and pb q's (a ring, but no
    # ring of creators), whatever order the creators are asked in.
    src = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    loop (m0, 0)
    where
        con loop (m: mem.M 0, i: Nat) =
            (stop, more)#(core.ncmp.l (i, 3)) m
            where
                con stop (m: mem.M 0) = return (m, core.bitcast I32 i);
                con more (m: mem.M 0) = pb m;
                con pb (m: mem.M 0) = (q, loop_next)#(core.ncmp.l (i, 9)) m;
                con q (m: mem.M 0) = pb m;
                con loop_next (m: mem.M 0) = loop (m, core.nat.add (i, 1));
            end;
    end;
"""
    w, _ = load_text(src)
    muts = _muts(w)
    for order in (("pb", "q"), ("q", "pb")):
        scopes = Scopes()
        got = {n: scopes.creator(muts[n]) for n in order}
        assert got["pb"] is muts["more"] and got["q"] is muts["pb"], order
        assert scopes.creator(muts["more"]) is muts["loop"]


# main, then `after`, whose branch goes to `one` (which jumps to `join`) or to `two`, given here
AFTER_BRANCH_JOIN = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m0, p) = mem.malloc (I32, 0) (m0, 4);
    after (m0, 3I32)
    where
        con after (m: mem.M 0, k: I32) = (two, one)#(core.icmp.e (argc, 1I32)) m;
        con one (m: mem.M 0) = join (m, 1I32);
{two}        con join (m: mem.M 0, v: I32) =
            let m = mem.store (m, p, v);
            let (m, x) = mem.load (m, p);
            let m = mem.free (m, p);
            return (m, x);
    end;
"""


def test_a_continuation_both_arms_of_a_branch_name_is_made_where_the_branch_is() -> None:
    # `join` is named by `one` and `two`, which only `after` names: after makes join's closure.
    src = AFTER_BRANCH_JOIN.format(two="""
        con two (m: mem.M 0) = join (m, 2I32);
""")
    w, _ = load_text(src)
    muts = _muts(w)
    scopes = Scopes()
    assert scopes.creator(muts["one"]) is muts["after"] and scopes.creator(muts["two"]) is muts["after"]
    assert scopes.creator(muts["join"]) is muts["after"]
    assert observe(w, ["prog", "x"]).result == ("ok", 2)


def test_a_continuation_named_from_branches_of_unequal_depth_is_made_by_its_dominator() -> None:
    # `join` is named by `one` directly and by `b1` and `b2`, the arms of a branch in `two`:
    # no one continuation names all its referrers, but every way to join passes through
    # `after`, which makes join's closure (join's immediate dominator in the graph of names).
    src = AFTER_BRANCH_JOIN.format(two="""
        con two (m: mem.M 0) =
            (b2, b1)#(core.icmp.ul (argc, 3I32)) m
            where
                con b1 (m: mem.M 0) = join (m, 2I32);
                con b2 (m: mem.M 0) = join (m, 12I32);
            end;
""")
    w, _ = load_text(src)
    muts = _muts(w)
    for order in (("join", "b1", "two"), ("two", "b1", "join")):
        scopes = Scopes()
        got = {n: scopes.creator(muts[n]) for n in order}
        assert got["join"] is muts["after"], order
        assert got["b1"] is muts["two"] and got["two"] is muts["after"], order
        assert muts["join"] in scopes.nested(muts["after"]) and muts["join"] not in scopes.nested(muts["two"])
    assert [observe(w, ["prog", *["x"] * n]).result for n in range(3)] == [("ok", 1), ("ok", 2), ("ok", 12)]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))))
def test_immediate_dominators_agree_with_networkx_on_any_graph(graph: tuple[int, list[tuple[int, int]]]) -> None:
    # networkx is the reference here (its import is why the scheduler has its own).
    n, edges = graph
    succ: dict[int, list[int]] = {i: [] for i in range(n)}
    for a, b in edges:
        if b not in succ[a]:
            succ[a].append(b)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, ys in succ.items() for b in ys)
    want = {k: v for k, v in nx.immediate_dominators(g, 0).items() if k != 0}  # 3.6 leaves out the root
    got = immediate_dominators(succ, 0)
    assert got.pop(0) == 0 and got == want


@pytest.mark.parametrize("name", ["valid/slot_bound_before_branch_host.mim",
                                  "valid/local_slot_bound_before_item_branch.mim",
                                  "fuzz_found/shared_need_inside_a_lambda.mim"])
def test_nodes_shared_by_continuations_keep_every_phase_and_target_in_agreement(name: str) -> None:
    # A node two continuations take from outside is computed by their creator once (one slot,
    # one block); never one inside an immutable λ's body, which only that λ can compute.
    from tests.conftest import PROGRAMS
    from verimim import driver

    path = PROGRAMS / name
    args = ["x"] if "slot" in name else []
    report = driver.diff(str(path), [], args, use_gpu=False)
    assert not [d for d in report.diagnostics if d.severity == "error"], [d.message for d in report.diagnostics]
