"""Dask worker preload of tests/fuzz/test_campaign_failures.py: breaks one phase, the way a
regression would. `gpu.remove_double_syncs` raises on every program that multiplies."""
from verimim.phases.base import walk
from verimim.phases.pipeline import PHASES

_phase = PHASES["gpu.remove_double_syncs"]
# Dask may run a preload file more than once in a worker: wrap the original only.
_apply = getattr(type(_phase).apply, "__wrapped__", type(_phase).apply)


def _broken(self, prog):  # type: ignore[no-untyped-def]
    for w in prog.worlds():
        for d in walk(w):
            if getattr(getattr(d, "head", None), "annex", None) == "core.wrap.mul":
                raise RuntimeError("remove_double_syncs broke on a multiplication")
    return _apply(self, prog)


_broken.__wrapped__ = _apply  # type: ignore[attr-defined]
type(_phase).apply = _broken
