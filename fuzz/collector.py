"""The cyclic garbage collector while programs are fuzzed: paused for the whole of each program
(its draw and its check), run once after it, and kept away from what the process keeps.

A program's draw and check make some 50,000 objects in reference cycles (a mutable's body
refers back to its parameter, which refers to the mutable; a World and the Rewriter that fills
it) and about as many that are not garbage at all. Left to itself, the collector ran as they
came, then promoted what was still alive (the program being checked) to the older generations,
where full collections — each traversing every long-lived object of the process, the loaded
plugins, the compiled code, Hypothesis's and the caches' — found it again. Measured on the
campaign's own task (benchmarks/fuzz.py, `direct`; the note of issue 13 has the numbers): the
collector cost about a fifth of a program's time, and half of that went away when it is paused
for the draw too and the process's long-lived objects are frozen (`gc.freeze`) after the first
program, so that no collection traverses them again.

Frozen objects are still freed by reference counting; only a cycle among them that becomes
garbage later is never collected, and they are what the first program left alive (loaded
plugins, caches), once per process. Collections run on whichever thread ends a program; z3's
objects are safe to release there (verimim.smt.z3_threads defers them to the Z3 thread).
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FULL_COLLECTION_EVERY = 64  # programs between two full collections (the rest: generations 0–1)
COLLECT_EVERY = 8  # programs after which to collect even while others run (a many-threaded worker)

_lock = threading.Lock()
_local = threading.local()  # .depth: nested uses on this thread (a check inside a draw-and-check)
_running = 0  # programs inside `one_program` now, on any thread
_restore = False  # whether the collector was enabled when the first of them began
_finished = 0  # programs finished in this process
_since = 0  # programs finished since the last collection
_last_full = 0  # `_finished` at the last full collection
_frozen = False


@contextmanager
def one_program() -> Iterator[None]:
    """The collector paused while a program is drawn and checked, and run when it is done (when
    no other program is running, or after COLLECT_EVERY programs). Nested uses on one thread
    are one program."""
    global _running, _restore
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    if depth > 0:
        try:
            yield
        finally:
            _local.depth = depth
        return
    with _lock:
        if _running == 0:
            _restore = gc.isenabled()
        _running += 1
        gc.disable()
    try:
        yield
    finally:
        _local.depth = 0
        _finish()


def _finish() -> None:
    global _running, _finished, _since, _last_full
    with _lock:
        _running -= 1
        _finished += 1
        _since += 1
        collect = _running == 0 or _since >= COLLECT_EVERY
        full = collect and _finished - _last_full >= FULL_COLLECTION_EVERY
        if collect:
            _since = 0
        if full:
            _last_full = _finished
    if collect:
        _collect(full)
    with _lock:
        if _running == 0 and _restore:
            gc.enable()


def _collect(full: bool) -> None:
    global _frozen
    if _frozen:
        gc.collect(2 if full else 1)
        return
    # The first program is done: what is alive now lives as long as the process (the plugins,
    # the caches, the imported modules); a full collection, then those are frozen.
    gc.collect()
    gc.freeze()
    _frozen = True
