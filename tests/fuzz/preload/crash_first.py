"""Dask worker preload of tests/fuzz/test_campaign_failures.py for a joined scheduler: program 0
of a campaign kills its worker process at once; every other one is checked as usual."""
import os

from verimim.fuzz import task

# Dask may run a preload file more than once in a worker: wrap the original only.
_check_index = getattr(task.check_index, "__wrapped__", task.check_index)


def _check(settings, index):  # type: ignore[no-untyped-def]
    if index == 0:
        os._exit(13)
    return _check_index(settings, index)


_check.__wrapped__ = _check_index  # type: ignore[attr-defined]
task.check_index = _check
