"""Z3 objects are released on the thread that works with Z3 (smt.z3_threads): a finalizer that
runs on another thread — the cyclic collector runs on whichever thread allocates, in a Dask
worker the event loop or the profiler — waits for the holder, between its Z3 calls."""
from __future__ import annotations

import threading

import z3

from verimim.driver import run_with_big_stack
from verimim.smt import z3_threads


def _release_elsewhere(box: list[object]) -> None:
    t = threading.Thread(target=box.clear)  # the last reference dies on that thread
    t.start()
    t.join()


def test_a_z3_object_released_on_another_thread_waits_for_the_holder() -> None:
    z3_threads.install()

    def work() -> tuple[int, int]:
        box: list[object] = [z3.BitVec("x", 32) + 1, z3.Solver()]
        before = z3_threads.deferred()
        _release_elsewhere(box)
        waiting = z3_threads.deferred() - before
        z3_threads.drain()
        return waiting, z3_threads.deferred()

    waiting, left = run_with_big_stack(work)
    assert waiting == 2  # the expression and the solver: not released on the other thread
    assert left == 0  # released on the holder


def test_without_a_holder_an_object_is_released_at_once() -> None:
    z3_threads.install()
    box: list[object] = [z3.BitVec("y", 8) * 3]
    before = z3_threads.deferred()
    _release_elsewhere(box)
    assert z3_threads.deferred() == before
