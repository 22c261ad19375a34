"""Where a campaign's programs are checked: a Dask cluster, local or joined.

`--workers N` starts a `LocalCluster` of N single-threaded worker processes (each under a
nanny, which starts a new process when one dies); `--scheduler tcp://HOST:PORT` joins a cluster
started elsewhere (`dask scheduler`, `dask worker` — see README, Fuzzing campaigns).

The campaign places each program on a free worker itself (fuzz/campaign.py), so a worker's
death is charged to the one program it ran. `allowed-failures` 0 makes the scheduler say so at
once (`KilledWorker`) instead of re-running the program on the next worker, and the next; it
applies to the clusters we start, a joined cluster keeps its own (README says how to set it).
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import UsageError

LOCAL_CONFIG = {
    "distributed.scheduler.allowed-failures": 0,
    "distributed.admin.tick.limit": "60s",  # a long Z3 query is no reason to warn every tick
    # A LocalCluster closes a worker's nanny when, this long after the worker was removed, no
    # worker of its name is connected. A hang's restart 15 s (the default) after a crash had
    # the worker down at that moment: the nanny was closed and never started another. Our
    # nannies restart their workers themselves; the campaign gives up on a cluster without one.
    "distributed.deploy.lost-worker-timeout": "1000d",
}


@dataclass
class Cluster:
    client: Any
    description: str
    close: Callable[[], None] = field(default=lambda: None)
    nannies: bool = True  # workers run under nannies, which start a new process when one is killed
    # Workers being restarted (their address, until the restart returns): given nothing meanwhile,
    # or the restart would kill the next program with them and charge it a crash.
    restarting: set[str] = field(default_factory=set)

    def slots(self) -> int:
        """Threads of the workers now connected (at least one, so that a run waits for one)."""
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # noqa: BLE001 — the scheduler is restarting a worker: try again later
            return 1

    def restart_worker(self, addr: str) -> bool:
        """Restart a worker (running a hung program), on a thread: a restart takes seconds, and
        the other workers' results keep coming meanwhile. False where it is impossible (no
        nanny: a worker started with --no-nanny, or an in-process cluster)."""
        if not self.nannies:
            return False

        def restart() -> None:
            try:
                self.client.restart_workers([addr], timeout=120, raise_for_error=False)
            except Exception as e:  # noqa: BLE001 — reported, the campaign goes on
                logging.getLogger("verimim.fuzz").warning("could not restart worker %s: %s", addr, e)
            finally:
                self.restarting.discard(addr)

        self.restarting.add(addr)
        threading.Thread(target=restart, name="verimim-restart", daemon=True).start()
        return True

    def death_note(self) -> str:
        """What a nanny last logged about a worker process it lost ("Worker process 123 exited
        with status -11", a memory budget exceeded), for a crash's record: '' when nothing says.
        (The dead worker's own log died with it; the nanny's outlives it.)"""
        if not self.nannies:
            return ""
        # (the scheduler may report the lost task before the nanny has logged the death: on a
        # loaded machine the note came a moment later, and the crash's record lacked it)
        for _ in range(DEATH_NOTE_TRIES):
            try:
                logs = self.client.get_worker_logs(n=50, nanny=True)
            except Exception:  # noqa: BLE001 — a busy or restarting scheduler: the crash keeps its message
                return ""
            notes = sorted(msg for entries in logs.values() for _level, msg in entries
                           if _DEATH.search(msg))
            if notes:
                return notes[-1].split(" - ", 3)[-1].strip()  # the newest, without time and logger
            time.sleep(0.25)
        return ""


DEATH_NOTE_TRIES = 8  # a quarter second apart

_DEATH = re.compile(r"exited with status|killed by signal|memory budget|Worker process \d+ was killed")


def gpu_ids() -> tuple[str, ...]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else every device."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return tuple(x.strip() for x in visible.split(",") if x.strip())
    from verimim.runtime.cuda import check, device_available, driver

    if not device_available():
        return ()
    return tuple(str(i) for i in range(int(check(driver().cuDeviceGetCount(), "cuDeviceGetCount"))))


class _SyncCancelRace(logging.Filter):
    """Drops the one log record distributed's `sync` makes when Ctrl-C comes before it has
    started its coroutine: its `cancel` callback reads a `future` not yet assigned, and tornado
    logs the NameError with a traceback (distributed 2026.8; the interrupt itself is handled,
    nothing is lost). Any other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, NameError) or exc.__traceback__ is None:
            return True
        last = exc.__traceback__
        while last.tb_next is not None:
            last = last.tb_next
        code = last.tb_frame.f_code
        return not (code.co_name == "cancel" and code.co_filename.endswith(os.path.join("distributed", "utils.py")))


_SYNC_CANCEL_RACE = _SyncCancelRace()


def connect(workers: int | None = None, scheduler: str | None = None, preload: tuple[str, ...] = (),
            processes: bool = True, gpus: tuple[str, ...] = ()) -> Cluster:
    """A client of a new local cluster (`workers`, default the machine's cores, or one per GPU
    of `gpus`, each worker seeing only its own) or of `scheduler`."""
    logging.getLogger("tornado.application").addFilter(_SYNC_CANCEL_RACE)  # (adding it again is a no-op)
    try:
        from distributed import Client, LocalCluster
    except ImportError as e:  # a declared dependency; say so instead of a traceback
        raise UsageError(f"fuzzing campaigns need dask.distributed ({e}); pip install 'dask[distributed]'") from None
    if scheduler is not None:
        client = _join(Client, scheduler)  # (its workers import the preloads: they may have modules we lack)
        if preload:
            client.register_plugin(_preload_plugin(preload))
        return Cluster(client, f"scheduler {scheduler}", client.close)
    _check_preload(preload)
    n = workers if workers is not None else (len(gpus) or os.cpu_count() or 1)
    _local_config(+1)  # in effect for the cluster's life: the lost-worker timeout is read when a worker goes
    cluster: Any = None
    try:
        try:
            # dashboard_address=None (no dashboard) is documented; its type is inferred from the default ":8787"
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes,
                                   dashboard_address=None,  # pyright: ignore[reportArgumentType]
                                   silence_logs=logging.CRITICAL if preload else logging.ERROR,
                                   # no dashboard, but the scheduler's HTTP routes still listen: on
                                   # a free port, not on 8787 with a warning when that one is taken
                                   scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                   preload=[WORKER_SETUP, *preload] if processes else list(preload) or None)
        except Exception as e:  # noqa: BLE001 — a preload that raises stops its worker's start
            if not preload:
                raise
            raise UsageError(f"--preload: the workers could not start with {', '.join(preload)} "
                             f"({type(e).__name__}: {e}); a preload module must import without error") from None
        client = Client(cluster)
        if gpus and processes:
            client.register_plugin(_one_gpu_plugin(gpus))
    except BaseException:
        if cluster is not None:
            cluster.close()
        _local_config(-1)
        raise

    def close() -> None:
        try:
            client.close()
            cluster.close()
        finally:
            _local_config(-1)

    return Cluster(client, f"LocalCluster of {n} worker{'s' if n != 1 else ''}", close, nannies=processes)


_CONFIG_LOCK = threading.Lock()
_config_users: list[Any] = []  # one entry per open local cluster; the first holds the undo


def _local_config(change: int) -> None:
    """LOCAL_CONFIG set while any cluster of ours is open (a count: two campaigns of one process
    may close in any order; dask.config.set's undo restores what it found, so undone by the
    first cluster to close it took the setting from the second, still running)."""
    import dask.config  # (a submodule that dask's own __init__ imports, but does not export)

    with _CONFIG_LOCK:
        if change > 0:
            _config_users.append(dask.config.set(LOCAL_CONFIG) if not _config_users else None)
            return
        undo = _config_users.pop()
        if undo is not None:  # the last one out: only the first entry holds the undo
            undo.__exit__(None, None, None)


JOIN_TIMEOUT_S = 10.0
WORKER_SETUP = "verimim.fuzz.worker_setup"  # (the workers of our own cluster ignore Ctrl-C)


def _join(client_type: Any, scheduler: str) -> Any:
    """A client of the scheduler at `scheduler`, or UsageError naming it. Dask's own timeout
    covers opening the connection, not the handshake after it: a port where something else
    listens (a web server) kept `Client` waiting for minutes. The client is made on a thread
    and waited for; one still waiting is left behind (a daemon thread) with the error."""
    _check_address(scheduler)
    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = client_type(scheduler, timeout=f"{JOIN_TIMEOUT_S:.0f}s")
        except Exception as e:  # noqa: BLE001 — handed to the caller below
            made["error"] = e

    worker = threading.Thread(target=make, name="verimim-join", daemon=True)
    worker.start()
    worker.join(JOIN_TIMEOUT_S + 5)
    if "client" in made:
        return made["client"]
    why = made.get("error")
    if why is None:
        why = f"no Dask handshake within {JOIN_TIMEOUT_S + 5:.0f} s (is it a Dask scheduler?)"
    elif not isinstance(why, (OSError, TimeoutError)):
        # Something answered, in another protocol: Dask read its bytes as a message header (a web
        # server's reply became "Unable to allocate 3.01 EiB for an array").
        raise UsageError(f"{scheduler} answered, but not as a Dask scheduler ({type(why).__name__}); "
                         f"give the address of `dask scheduler`, by default port 8786")
    raise UsageError(f"the Dask scheduler {scheduler} does not answer: {why}")


_ADDRESS = re.compile(r"^(?:(tcp|tls|ucx)://)?(\[[0-9a-fA-F:.]+\]|[^:/\[\]\s]+):(\d+)$")


def _check_address(scheduler: str) -> None:
    """A scheduler address as `dask scheduler` prints it (`tcp://HOST:PORT`, `tls://…`, `ucx://…`,
    or `HOST:PORT`), and, for plain TCP, a port that does not refuse connections: said at once
    (a malformed address was reported as "answered, but not as a Dask scheduler", and a
    refused port waited out Dask's 10 s connection time-out)."""
    import socket

    m = _ADDRESS.match(scheduler)
    if m is None or not 0 < int(m.group(3)) < 65536:
        raise UsageError(f"`{scheduler}` is not a Dask scheduler address: give `tcp://HOST:PORT` as "
                         f"`dask scheduler` prints it (by default port 8786)")
    if m.group(1) in ("tls", "ucx"):
        return  # (their handshakes are Dask's to make)
    host = m.group(2).strip("[]")
    try:
        socket.create_connection((host, int(m.group(3))), timeout=2).close()
    except ConnectionRefusedError:
        raise UsageError(f"the Dask scheduler {scheduler} does not answer: the port refuses connections "
                         f"(is `dask scheduler` running there?)") from None
    except OSError:
        return  # (a name that does not resolve, a time-out: Dask's connect says it, with its reason)


def _check_preload(modules: tuple[str, ...]) -> None:
    """Each --preload is a Python file or an importable module here (Dask reports one it cannot
    load only as "Nanny failed to start", after the cluster began to start)."""
    import importlib.util

    for m in modules:
        if m.endswith(".py"):
            if not os.path.isfile(m):
                raise UsageError(f"--preload: no file `{m}`")
            continue
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"--preload: no module `{m}` can be imported here (give a module name or a .py file)")


def _one_gpu_plugin(gpus: tuple[str, ...]) -> Any:
    """Worker `i` of a local cluster (LocalCluster names them 0, 1, ...) sees GPU gpus[i mod n]
    only. It is set before the worker's first task, so before it initialises CUDA; a restarted
    worker keeps its name and gets its GPU again."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class OneGpu(WorkerPlugin):  # type: ignore[misc]
        name = "verimim-fuzz-one-gpu"

        def setup(self, worker: Any) -> None:
            try:
                i = int(worker.name)
            except (TypeError, ValueError):
                i = abs(hash(worker.name))
            os.environ["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]

    return OneGpu()


def _preload_plugin(modules: tuple[str, ...]) -> Any:
    """Import the preload modules on every worker of a joined cluster (our own LocalCluster
    passes them to its workers directly)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Preload(WorkerPlugin):  # type: ignore[misc]
        name = "verimim-fuzz-preload"

        def setup(self, worker: Any) -> None:
            import importlib

            for m in modules:
                importlib.import_module(m)

    return Preload()
