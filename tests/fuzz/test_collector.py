"""The cyclic collector around fuzzed programs (verimim.fuzz.collector): paused while a program
runs, run when it is done, also when programs of other threads never stop overlapping."""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

from verimim.fuzz import collector
from verimim.fuzz.collector import one_program


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _cycle() -> "weakref.ref[_Node]":
    return weakref.ref(_Node())


@pytest.fixture(autouse=True)
def _collector_on() -> object:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_a_program_and_collected_after_it() -> None:
    with one_program():
        assert not gc.isenabled()
        dead = _cycle()
        assert dead() is not None  # nothing collects it while the program runs
    assert dead() is None
    assert gc.isenabled()


def test_nested_uses_are_one_program() -> None:
    with one_program():
        with one_program():
            inner = _cycle()
        assert not gc.isenabled()
        assert inner() is not None  # the inner end is not the program's end
    assert inner() is None


def test_a_paused_collector_stays_paused() -> None:
    gc.disable()
    with one_program():
        dead = _cycle()
    assert dead() is None
    assert not gc.isenabled()


def test_overlapping_programs_of_other_threads_still_get_collected() -> None:
    started, release = threading.Event(), threading.Event()

    def long_program() -> None:
        with one_program():
            started.set()
            release.wait(30)

    t = threading.Thread(target=long_program)
    t.start()
    started.wait(30)
    try:
        refs = []
        for _ in range(collector.COLLECT_EVERY):
            with one_program():
                refs.append(_cycle())
        assert all(r() is None for r in refs)  # collected although the other program runs
        assert not gc.isenabled()  # ... and the collector stays paused for it
    finally:
        release.set()
        t.join()
    assert gc.isenabled()


def test_what_the_first_program_leaves_alive_is_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_frozen", False)
    gc.unfreeze()
    kept = _Node()
    try:
        with one_program():
            dead = _cycle()
        assert dead() is None
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # frozen: in no generation any more
    finally:
        gc.unfreeze()
