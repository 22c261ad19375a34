"""Z3's Python objects are released on the thread that works with Z3, never on another one.

A z3 object's `__del__` calls the C API (`Z3_dec_ref`, `Z3_solver_dec_ref`, …), and ctypes
releases the GIL around each call, but a Z3 context is not thread-safe. Python's cyclic garbage
collector runs on whichever thread allocates when its threshold is crossed: in a Dask worker
that is often the event loop or the statistical profiler, while verimim's thread is inside
`Z3_solver_check`. A z3 object in a collected cycle is then released concurrently with the
check, corrupting the context. Campaigns lost about one worker in a thousand to a
`signal 11` that never reproduced alone, where no other thread runs.

`hold()` names the thread doing verimim's work (verimim.driver.run_with_big_stack); a finalizer
that runs on any other thread while it holds is deferred, and `drain()` runs the deferred ones
on the holder, at points where it is between Z3 calls (each solver made or checked, and when
the work ends).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_holder: int | None = None
_deferred: list[tuple[Callable[[Any], None], Any]] = []
_installed = False


def _guarded(release: Callable[[Any], None]) -> Callable[[Any], None]:
    def __del__(self: Any) -> None:
        holder = _holder
        if holder is None or holder == threading.get_ident():
            release(self)
        else:
            _deferred.append((release, self))  # keeps the object alive until drained
    return __del__


def install() -> None:
    """Guard the finalizer of every z3 class that has one (once per process)."""
    global _installed
    if _installed:
        return
    import z3.z3 as api

    for cls in list(vars(api).values()):
        if isinstance(cls, type) and "__del__" in cls.__dict__ and cls is not api.Context:
            cls.__del__ = _guarded(cls.__dict__["__del__"])  # type: ignore[attr-defined]
    # Z3 takes SIGINT during a check to cancel that one query (`unknown`), and the command went
    # on with the next: Ctrl-C did nothing in a long `check`. Off, it is Python's
    # KeyboardInterrupt on the main thread, which ends the command (verimim.cli).
    api.set_param("ctrl_c", False)
    _installed = True


def drain() -> None:
    """Run the finalizers deferred from other threads (on the holder, between Z3 calls)."""
    if _holder is not None and _holder != threading.get_ident():
        return
    while _deferred:
        release, obj = _deferred.pop()
        release(obj)


@contextmanager
def hold() -> Iterator[None]:
    """This thread works with Z3 until the block ends."""
    global _holder
    previous = _holder
    _holder = threading.get_ident()
    try:
        yield
    finally:
        drain()
        _holder = previous


def deferred() -> int:
    """How many releases wait for the holder."""
    return len(_deferred)
