"""Tests of verimim.ir.typecheck: a World the front end built is well typed (valid corpus programs
too), and an application that `World.app` builds without checking — an argument of another type
than its callee's domain — is reported with the application, the domain, the argument's type
and its place, as upstream MimIR's `World::app` (Checker::assignable) would refuse to build it."""
from __future__ import annotations

import pytest

from tests.conftest import PROGRAMS
from verimim.driver import load, run_with_big_stack
from verimim.frontend.loader import load_text
from verimim.ir.defs import App, Axiom, Def, Lam, MutLam
from verimim.ir.typecheck import check_world
from verimim.ir.world import World
from verimim.phases.base import apps_of, walk

PROGRAM = """
plugin core;
plugin mem;

fun add3 (a: I32, b: I32, c: I32): I32 = return (core.wrap.add 0 (a, core.wrap.add 0 (b, c)));

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, arr) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, arr, ‹j: 4; core.bitcast I32 j›);
    let (m0, v) = mem.load (m0, mem.lea (arr, 2_4));
    let (m0, s) = mem.alloc (I8, 0) m0;
    let m0 = mem.store (m0, s, 7I8);
    let (m0, b) = mem.load (m0, s);
    let m0 = mem.free (m0, s);
    let m0 = mem.free (m0, arr);
    ret r = add3 $ (v, argc, core.bitcast I32 b);
    return (m0, r);
"""

# Upstream's rules that a checker comparing types by identity would get wrong: a dependent
# sigma domain reduced with the argument (here nested in a function's domain), `⊤` (an array of
# unknown length, `Idx ⊤`), a sigma of equal fields as its array.
RULES = """
plugin core;
plugin mem;

lam size (s: [n: Nat, v: «n; I32»]): Nat = s#0_2;
fun first (m: mem.M 0, p: mem.Ptr0 «⊤:Nat; I32»): [mem.M 0, I32] =
    let (m, v) = mem.load (m, mem.lea (p, core.idx_unsafe 0));
    return (m, v);
lam pair (x: [I32, I32]): I32 = x#1_2;
fun apply (f: I32 → I32, x: I32): I32 = return (f x);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let t = (3, (7I32, argc, 0I32));
    let n = size t;
    let (m0, a) = mem.alloc («3; I32», 0) m0;
    let m0 = mem.store (m0, a, (1I32, 2I32, 3I32));
    ret (m0, v) = first $ (m0, core.bitcast (mem.Ptr0 «⊤:Nat; I32») a);
    let m0 = mem.free (m0, a);
    ret y = apply $ (lm (y: I32): I32 = core.wrap.add 0 (y, 1I32), argc);
    return (m0, core.wrap.add 0 (core.bitcast I32 n, core.wrap.add 0 (v, pair (y, argc))));
"""


def world(text: str = PROGRAM) -> World:
    return run_with_big_stack(lambda: load_text(text)[0])


def replace(w: World, old: Def, new: Def) -> None:
    """Every mutable's body with `old` replaced by `new` (rebuilt through `World`'s unchecked
    constructors, as a phase builds)."""
    memo: dict[int, Def] = {}

    def go(d: Def) -> Def:
        if d is old:
            return new
        if isinstance(d, MutLam) or not d.ops:
            return d
        hit = memo.get(d.gid)
        if hit is None:
            ops = tuple(go(op) for op in d.ops)
            hit = memo[d.gid] = d if all(a is b for a, b in zip(ops, d.ops)) else d.rebuild(w, ops)
            if hit.loc is None:
                hit.loc = d.loc  # (as a phase's Rewriter places what it rebuilds)
        return hit

    for m in w.muts:
        if m.body is not None:
            m.body = go(m.body)


def only_app(w: World, annex: str, depth: int = 2, pick: int = 0) -> App:
    apps = apps_of(w, annex, depth)
    assert apps, annex
    return apps[pick]


def test_a_program_the_front_end_built_is_well_typed() -> None:
    assert check_world(world()) == []
    assert check_world(world(RULES)) == []


@pytest.mark.parametrize("name", ["lea_index_in_range.mim", "dependent_sigma_of_a_let_bound_tuple.mim",
                                  "btensor_row_sums.mim"])
def test_corpus_programs_are_well_typed(name: str) -> None:
    w = run_with_big_stack(lambda: load(str(PROGRAMS / "valid" / name), [])[0])
    assert check_world(w) == []


def test_a_lea_that_names_another_array_type_than_its_pointers() -> None:
    w = world()
    lea = only_app(w, "mem.lea")
    head = lea.head
    assert isinstance(head, Axiom)
    # `mem.lea @(5, ‹5; I32›, 0) (arr, 2_4)` with arr: mem.Ptr («4; I32», 0)
    implicit = w.tuple([w.lit_nat(5), w.pack(w.lit_nat(5), w.idx_n(2**32)), w.lit_nat(0)])
    bad = w.app(w.app(head, implicit), lea.arg)
    bad.loc = lea.loc
    replace(w, lea, bad)
    found = check_world(w)
    assert len(found) == 1 and found[0].node is bad
    msg = found[0].message
    assert "mem.lea" in msg and "«5; I32»" in msg and "«4; I32»" in msg, msg
    assert found[0].loc is not None and found[0].loc.line == 11


def test_a_load_of_i32_through_a_pointer_to_i8() -> None:
    w = world()
    load_i8 = only_app(w, "mem.load", pick=1)
    assert "I8" in repr(load_i8.callee)
    head = load_i8.head
    bad = w.app(w.app(head, w.tuple([w.idx_n(2**32), w.lit_nat(0)])), load_i8.arg)
    replace(w, load_i8, bad)
    found = check_world(w)
    # the load, and the use of its value as the I8 it was (`core.bitcast @I8 I32`)
    assert len(found) == 2 and bad in [f.node for f in found]
    (msg,) = [f.message for f in found if f.node is bad]
    assert "`[mem.M 0, mem.Ptr (I8, 0)]`" in msg and "`I8` where `I32` is expected" in msg, msg
    assert any("core.bitcast @I8 I32" in f.message and "whose domain is `I8`" in f.message for f in found)


def test_an_argument_of_another_arity() -> None:
    w = world()
    add3 = next(m for m in w.muts if m.name == "add3")
    call = next(d for d in apps_of_callee(w, add3))
    args = call.arg.ops[0]  # ((v, argc, b), return)
    bad = w.app(add3, w.tuple([w.tuple(args.ops[:2]), call.arg.ops[1]]))
    replace(w, call, bad)
    found = check_world(w)
    assert [f.node for f in found] == [bad]
    assert "`«2; I32»` where `«3; I32»` is expected" in found[0].message, found[0].message


def test_a_body_that_is_not_of_the_codomain() -> None:
    w = world()
    lam = w.mut_lam(w.pi(w.nat(), w.idx_n(2**8)), "f", "lam")
    lam.body = w.lit_nat(3)  # a Nat where an I8 is promised
    seven = w.lit_idx(2**8, 7)
    replace(w, seven, w.app(lam, w.lit_nat(1)))  # `mem.store (m0, s, f 1)`
    found = check_world(w)
    assert [f.node for f in found] == [lam]
    assert "the body of `f` is of type `Nat`, not of its codomain `I8`" in found[0].message, found[0].message


def test_an_application_under_an_immutable_binder_is_checked_in_its_instance() -> None:
    w = world(RULES)
    (lam,) = [d for d in walk(w) if isinstance(d, Lam)]  # `lm (y: I32): I32 = core.wrap.add 0 (y, 1I32)`
    body = lam.body
    assert isinstance(body, App) and body.bvd == 1
    y = body.arg.ops[1]  # (the normalizer put the literal first: `core.wrap.add 0 (1I32, y)`)
    assert y.bvd == 1
    bad_body = w.app(body.callee, w.tuple([w.lit_idx(2**8, 1), y]))  # (1I8, y)
    replace(w, lam, w.lam(lam.pi, bad_body))
    found = check_world(w)
    assert len(found) == 1 and "core.wrap.add" in found[0].message, [f.message for f in found]
    assert "`[I8, I32]`" in found[0].message, found[0].message


def test_an_ill_typed_application_is_reported_once_and_results_are_kept() -> None:
    w = world()
    load_i8 = only_app(w, "mem.load", pick=1)
    bad = w.app(w.app(load_i8.head, w.tuple([w.idx_n(2**32), w.lit_nat(0)])), load_i8.arg)
    replace(w, load_i8, bad)
    first = check_world(w)
    assert first and check_world(w) == first


def apps_of_callee(w: World, callee: Def) -> list[App]:
    return [d for d in walk(w) if isinstance(d, App) and d.callee is callee]


def test_messages_name_the_application_the_domain_and_the_argument() -> None:
    w = world()
    lea = only_app(w, "mem.lea")
    bad = w.app(lea.callee, w.tuple([lea.arg.ops[0], w.lit_idx(8, 2)]))  # an index of Idx 8 for «4; I32»
    replace(w, lea, bad)
    (found,) = check_world(w)
    assert "whose domain is" in found.message and "to an argument of type" in found.message
    assert "`Idx 8` where `Idx 4` is expected" in found.message, found.message
    assert str(found).startswith(f"{found.loc}: ")


def test_nothing_is_left_in_the_worlds_folds() -> None:
    """Opening binders to check them builds instances; those are no folds of the program."""
    w = world(RULES)
    before = dict(w.folds or {})
    check_world(w)
    assert dict(w.folds or {}) == before



def test_an_ill_typed_application_the_normalizers_folded_is_reported() -> None:
    """`core.wrap.add 0 (1I32, 1I8)` folds to `2I32` as it is built: the output holds only the
    literal, but the World's folds keep the application as written (which `check` proves)."""
    w = world()
    add = only_app(w, "core.wrap.add", depth=3)
    w.folds = {}
    w.site = add.loc
    folded = w.app(add.callee, w.tuple([w.lit_idx(2**32, 1), w.lit_idx(2**8, 1)]))
    assert folded is w.lit_idx(2**32, 2)
    (found,) = check_world(w)
    assert "`[I32, I8]`" in found.message and found.loc == add.loc, found
