"""Dask worker preload of every campaign's own LocalCluster (verimim.fuzz.cluster.connect).

A terminal's Ctrl-C signals the whole process group: the campaign's process, which ends the
run and prints its summary (exit 130), and its worker processes, which died of it each with a
traceback on the user's terminal. The workers ignore SIGINT: the campaign closes them."""
from __future__ import annotations

import signal
from typing import Any


def dask_setup(worker: Any) -> None:  # noqa: ARG001 — Dask's preload hook
    signal.signal(signal.SIGINT, signal.SIG_IGN)
