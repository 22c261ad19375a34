"""Tests of the analyses kept beside a World or on a mutable for its current contents
(verimim.phases.base.walk and apps_of, verimim.ir.analysis.scan_mut): kept while what they
were found in stays the same, found again as soon as it changes, never copied with a World."""
from __future__ import annotations

from verimim.frontend.loader import load_text
from verimim.ir.analysis import scan_mut
from verimim.ir.defs import App, MutLam
from verimim.ir.world import World
from verimim.phases.base import apps_of, walk

PROGRAM = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m1, p) = mem.malloc (I32, 0) (m0, 4);
    let m2 = mem.store (m1, p, argc);
    let (m3, v) = mem.load (m2, p);
    let m4 = mem.free (m3, p);
    return (m4, v);
"""


def fresh_walk(world: World) -> list[int]:
    """The walk as it is found from scratch (explicit roots are never kept)."""
    return [d.gid for d in walk(world, list(world.externals.values()))]


def world() -> World:
    return load_text(PROGRAM)[0]


def return_at_once(w: World, main: MutLam) -> None:
    """main's body becomes `return (m0, argc)`: nothing of the old body is reached."""
    ret = main.body
    assert isinstance(ret, App)
    args = w.extract(w.var(main), w.lit_idx(2, 0))
    m0, argc = (w.extract(args, w.lit_idx(3, i)) for i in (0, 1))
    main.body = w.app(ret.callee, w.tuple([m0, argc]))


def test_a_walk_again_finds_the_same_nodes_in_the_same_order() -> None:
    w = world()
    first = [d.gid for d in walk(w)]
    assert first == fresh_walk(w)
    assert [d.gid for d in walk(w)] == first


def test_a_changed_body_is_walked_as_it_is_now() -> None:
    w = world()
    main = w.externals["main"]
    assert isinstance(main, MutLam) and main.body is not None
    stores = apps_of(w, "mem.store", 2)
    assert len(stores) == 1
    before = [d.gid for d in walk(w)]
    return_at_once(w, main)
    after = [d.gid for d in walk(w)]
    assert after != before and after == fresh_walk(w)
    assert apps_of(w, "mem.store", 2) == []


def test_a_walk_stopped_early_is_not_kept() -> None:
    w = world()
    it = walk(w)
    next(it)
    del it
    assert [d.gid for d in walk(w)] == fresh_walk(w)


def test_a_new_external_is_walked_from() -> None:
    w = world()
    before = len(list(walk(w)))
    other = load_text(PROGRAM)[0].externals["main"]
    w.externals["other"] = other  # a foreign mutable, only to have a new root
    assert len(list(walk(w))) > before


def test_scan_mut_is_found_again_for_a_new_body() -> None:
    w = world()
    main = w.externals["main"]
    assert isinstance(main, MutLam) and main.body is not None
    vars_, muts = scan_mut(main)
    assert main in vars_
    vars_.clear()  # a caller may change what it is given: the kept result stays as it was
    assert main in scan_mut(main)[0]
    kept = main._scans[False]
    return_at_once(w, main)
    assert scan_mut(main)[0] == {main}
    assert main._scans[False] is not kept and main._scans[False][0] is main.body
