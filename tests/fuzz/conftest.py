"""Fixtures of the fuzzing tests."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def dask_scheduler() -> Iterator[str]:
    """The address of a `dask scheduler` of its own process on a free local port, stopped after
    the test (a campaign joins it with --scheduler)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                              "--port", str(port), "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.3)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        sched.terminate()
        sched.wait(30)
