"""Tests of the compiled code that Machines share (kept with their World, `World.kept`): one
compilation per World for the standard operations, shared with a machine whose semantics are
wrapped (each runs its own functions), not with one that has other operations, and nothing
kept once the World is gone."""
from __future__ import annotations

import gc
import weakref

from verimim.frontend.loader import load_text
from verimim.interp.machine import Machine, find_main
from verimim.interp.observe import observe

LOOP = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr («⊤:Nat; mem.Ptr («⊤:Nat; I8», 0)», 0)): [mem.M 0, I32] =
    let (m1, p) = mem.malloc (I32, 0) (m0, 4);
    let m2 = mem.store (m1, p, core.wrap.mul 0 (argc, 6I32));
    let (m3, v) = mem.load (m2, p);
    let m4 = mem.free (m3, p);
    return (m4, v);
"""


def test_two_machines_on_one_world_share_its_compiled_code() -> None:
    w = load_text(LOOP)[0]
    main = find_main(w)
    a, b = Machine(w), Machine(w, seed=1)
    assert a.run_main(main, ["prog"]) == b.run_main(main, ["prog", "1"]) // 2 == 6
    assert a.compiler_for(main) is b.compiler_for(main)
    assert a.code_of(main) is b.code_of(main)


def test_a_machine_with_wrapped_semantics_shares_the_code_and_runs_its_own_functions() -> None:
    w = load_text(LOOP)[0]
    main = find_main(w)
    plain = Machine(w)
    changed = Machine(w)
    arity, fn = changed.semantics["mem.store"]
    stores: list[int] = []

    def counted(m: Machine, th: object, args: list[object], node: object) -> object:
        stores.append(1)
        return fn(m, th, args, node)
    changed.semantics["mem.store"] = (arity, counted)
    assert plain.run_main(main, ["prog"]) == changed.run_main(main, ["prog"]) == 6
    assert stores == [1]  # the shared code calls the running machine's semantics
    assert changed.compiler_for(main) is plain.compiler_for(main)
    assert plain.run_main(main, ["prog"]) == 6 and stores == [1]  # and not another machine's
    # observing with effects traced (wrapped semantics) shows what the plain run shows
    traced = observe(w, ["prog", "x"], effects=True)
    assert traced.result == observe(w, ["prog", "x"]).result == ("ok", 12)
    assert dict(traced.effects or ()).get("mem.store") == 1


def test_a_machine_with_other_operations_compiles_for_itself() -> None:
    w = load_text(LOOP)[0]
    main = find_main(w)
    plain = Machine(w)
    other = Machine(w)
    other.register("test.extra", 1, lambda m, th, args, node: 0)
    assert plain.run_main(main, ["prog"]) == other.run_main(main, ["prog"]) == 6
    assert other.compiler_for(main) is not plain.compiler_for(main)


def test_the_shared_code_does_not_keep_its_world_alive() -> None:
    w = load_text(LOOP)[0]
    assert Machine(w).run_main(find_main(w), ["prog"]) == 6
    gone = weakref.ref(w)
    del w
    gc.collect()
    assert gone() is None


def test_what_is_kept_of_a_world_goes_with_it_in_one_young_collection() -> None:
    # The fuzz oracle runs the young collection only after each program: analyses kept beside a
    # World (keyed by it weakly) held its nodes through the collection that freed the World, and
    # they piled up until a full one (60,000 objects a program, 280 MiB after 60 programs).
    from verimim.ir.schedule import Scopes
    from verimim.phases.base import walk

    gc.collect()
    gc.disable()
    try:
        w = load_text(LOOP)[0]
        main = find_main(w)
        assert observe(w, ["prog"]).result == ("ok", 6)  # compiled code and nesting kept with w
        assert main in Scopes(w).nested(main) and main in list(walk(w))
        assert w.kept
        node = weakref.ref(main)
        del w, main
        gc.collect(1)
        assert node() is None
    finally:
        gc.enable()
