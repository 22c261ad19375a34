"""Dask worker preload of tests/fuzz/test_campaign_failures.py: program 1 of a campaign never
finishes and holds the interpreter lock meanwhile (a loop in C), so its worker answers nothing
until it is restarted; every other program is checked as usual."""
from verimim.fuzz import task

# Dask may run a preload file more than once in a worker: wrap the original only.
_check_index = getattr(task.check_index, "__wrapped__", task.check_index)


def _check(settings, index):  # type: ignore[no-untyped-def]
    if index == 1:
        sum(range(10 ** 15))  # hours, in one C call
    return _check_index(settings, index)


_check.__wrapped__ = _check_index  # type: ignore[attr-defined]
task.check_index = _check
