"""The campaign's Dask cluster (verimim.fuzz.cluster): a GPU campaign's local workers each see
one GPU of their own (checked through the environment CUDA reads; no GPU needed)."""
from __future__ import annotations

import logging
import os
import threading

import pytest

from verimim.fuzz import cluster as cluster_module
from verimim.fuzz.cluster import connect, gpu_ids


def _visible() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_each_local_worker_sees_its_own_gpu() -> None:
    cluster = connect(workers=2, gpus=("7", "9"))
    try:
        seen = cluster.client.run(_visible)
    finally:
        cluster.close()
    assert sorted(seen.values()) == ["7", "9"]


def test_gpu_ids_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert gpu_ids() == ("2", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_ids() == ()



def _interrupted_sync_records(monkeypatch: pytest.MonkeyPatch) -> list[logging.LogRecord]:
    """Ctrl-C while distributed's `sync` waits, before its coroutine has started (the race CI
    hit): the records tornado's logger lets through while the loop runs the cancel callback."""
    import distributed.utils as du

    class InterruptedEvent(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            raise KeyboardInterrupt

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    async def work() -> int:
        return 1

    handler = Keep()
    tornado_log = logging.getLogger("tornado.application")
    tornado_log.addHandler(handler)
    runner = du.LoopRunner(asynchronous=False)
    runner.start()
    # The loop is held until the interrupt is in: under load it ran `work` to its end before
    # `sync` waited at all, and nothing was interrupted (the test failed once in a full run).
    gate = threading.Event()
    runner.loop.add_callback(gate.wait, 30)
    try:
        monkeypatch.setattr(du.threading, "Event", InterruptedEvent)
        with pytest.raises(KeyboardInterrupt):
            du.sync(runner.loop, work)
        monkeypatch.undo()
        gate.set()
        done = threading.Event()
        runner.loop.add_callback(done.set)  # (runs after the cancel callback, on the same loop)
        assert done.wait(5)
    finally:
        gate.set()
        runner.stop()
        tornado_log.removeHandler(handler)
    return records


def test_ctrl_c_during_a_dask_call_prints_no_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reproduction makes distributed log its NameError without the campaign's filter, and
    nothing with it; the filter keeps every other record."""
    tornado_log = logging.getLogger("tornado.application")
    tornado_log.removeFilter(cluster_module._SYNC_CANCEL_RACE)
    unfiltered = _interrupted_sync_records(monkeypatch)
    assert [type(r.exc_info[1]) for r in unfiltered if r.exc_info] == [NameError], unfiltered
    tornado_log.addFilter(cluster_module._SYNC_CANCEL_RACE)
    assert _interrupted_sync_records(monkeypatch) == []
    other = logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "boom", None,
                              (NameError, NameError("x"), None))
    assert cluster_module._SYNC_CANCEL_RACE.filter(other)


def test_the_local_config_holds_while_any_cluster_is_open(monkeypatch: pytest.MonkeyPatch) -> None:
    # dask.config.set's undo restores what it found: two clusters closed in the order they
    # opened took the lost-worker timeout from the second while it ran (the stall after a
    # crash and a hang), and left the setting behind for good; a connect that failed after the
    # cluster started left it set (and the cluster running)
    import dask.config
    import distributed

    key = "distributed.deploy.lost-worker-timeout"
    before = dask.config.get(key)
    a = connect(workers=1, processes=False)
    b = connect(workers=1, processes=False)
    a.close()
    assert dask.config.get(key) == "1000d", "b is still open"
    b.close()
    assert dask.config.get(key) == before

    def no_client(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no client")

    monkeypatch.setattr(distributed, "Client", no_client)
    with pytest.raises(RuntimeError, match="no client"):
        connect(workers=1, processes=False)
    assert dask.config.get(key) == before
