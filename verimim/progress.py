"""Progress of long work on stderr, terminal or not.

Fuzzing, whose budget is known: on a terminal, a rich progress bar that disappears when the work
ends; otherwise (CI logs, a pipe, `2> file`) rich shows nothing at all, so plain lines are
printed instead, one every `interval` seconds and one at the end. `check`, `run` and `diff`,
whose length is not known: a `heartbeat` line every `interval` seconds while they work, none
for work shorter than that. No long command is silent.
"""
from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TextIO

Progress = Callable[[int, float, int], None]  # (programs so far, seconds so far, failures so far)

PLAIN_INTERVAL_S = 10.0


def plain_line(what: str, n: int, seconds: float, failures: int, budget: float) -> str:
    of = f" of {budget:.0f} s" if math.isfinite(budget) else ""  # (--programs alone: no time limit)
    return f"{what}: {seconds:.0f} s{of}, {n} programs, {failures} failures"


@contextmanager
def plain_progress(what: str, budget: float, stream: TextIO,
                   interval: float = PLAIN_INTERVAL_S,
                   clock: Callable[[], float] = time.monotonic) -> Iterator[Progress]:
    last: list[float] = [clock()]
    state: list[tuple[int, float, int]] = [(0, 0.0, 0)]

    def update(n: int, t: float, f: int) -> None:
        state[0] = (n, t, f)
        now = clock()
        if now - last[0] >= interval:
            last[0] = now
            stream.write(plain_line(what, n, t, f, budget) + "\n")
            stream.flush()

    yield update
    n, t, f = state[0]
    stream.write(plain_line(what, n, t, f, budget) + " (done)\n")
    stream.flush()


@contextmanager
def bar_progress(what: str, budget: float) -> Iterator[Progress]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn

    bar = Bar(TextColumn(what), BarColumn(), TextColumn("{task.fields[n]} programs, {task.fields[f]} failures"),
              TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task(what, total=budget if math.isfinite(budget) else None, n=0, f=0)
        yield lambda n, t, f: bar.update(task, completed=min(t, budget), n=n, f=f)


def progress(what: str, budget: float, stream: TextIO | None = None) -> AbstractContextManager[Progress]:
    """The progress display for `budget` seconds of work: a bar on a terminal, lines otherwise."""
    out = sys.stderr if stream is None else stream
    isatty = getattr(out, "isatty", None)
    if isatty is not None and isatty():
        return bar_progress(what, budget)
    return plain_progress(what, budget, out)


@contextmanager
def heartbeat(what: str, stream: TextIO | None = None, interval: float = PLAIN_INTERVAL_S) -> Iterator[None]:
    """`what: still working, 20 s` on stderr every `interval` seconds until the block ends."""
    out = sys.stderr if stream is None else stream
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(interval):
            out.write(f"{what}: still working, {time.monotonic() - start:.0f} s\n")
            out.flush()

    thread = threading.Thread(target=beat, name="verimim-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
