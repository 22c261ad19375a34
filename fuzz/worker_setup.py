"""Dask worker preload of every campaign's own LocalCluster (verimim.fuzz.cluster.connect).

A terminal's Ctrl-C signals the whole process group: the campaign's process, which ends the
run and prints its summary (exit 130), and its worker processes, which died of it each with a
traceback on the user's terminal. The workers ignore SIGINT: the campaign closes them. (Closed
after their scheduler, as a campaign's end may close them, a worker logged its failed heartbeat
with a traceback too: that one record is dropped.)"""
from __future__ import annotations

import logging
import signal
from typing import Any


class _ClosingHeartbeat(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to communicate with scheduler during heartbeat")


def dask_setup(worker: Any) -> None:  # noqa: ARG001 — Dask's preload hook
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_ClosingHeartbeat())
