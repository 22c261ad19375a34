"""`verimim fuzz --campaign DIR`: a resumable, deduplicating, reducing campaign on Dask.

The campaign side submits program indices to the cluster (never more than it has free
threads, so a worker holds one program at a time). A worker first draws the program and sends
back its fingerprint; a program the campaign has drawn before (in this run or an earlier one)
is journaled as a duplicate of the first and not checked again; a new one is checked on the
same worker, which kept it. Each result is journaled the moment it comes back; for a signature
seen for the first time the campaign writes `DIR/failures/<signature>/` (original.mim,
failure.json, reproduce.sh) and submits its reduction (reduced.mim when done).

A program whose result does not come back within `program_timeout` is journaled as `hang`
(its worker restarted, which ends the stuck check); one whose worker process died is
journaled as `crash`. Either way its reproducer is regenerated from its seed here, and the
campaign goes on.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from verimim.diagnostics import UsageError
from verimim.fuzz.cluster import Cluster, connect, gpu_ids
from verimim.fuzz.journal import Journal
from verimim.fuzz.kernel_oracle import is_false_alarm, kernel_summary
from verimim.fuzz.reduce import size
from verimim.fuzz.signature import Signature
from verimim.fuzz.task import (
    Checked, Generated, Settings, check_index, choices_from_json, generate_index, lost, reduce_index,
)

DEFAULT_PROGRAM_TIMEOUT = 300.0
DEFAULT_REDUCE_BUDGET = 60.0
NO_WORKER_TIMEOUT = 300.0  # a joined cluster without any worker for this long: give up
WORKER_WAIT = 60.0  # a joined scheduler must have a worker within this (or the budget) at the start


@dataclass(frozen=True)
class RunSummary:
    """What `fuzz --campaign --json` prints: the plain fuzz keys, for this run, plus the campaign's."""

    campaign: str
    run: int
    programs: int
    seconds: float
    failures: list[dict[str, Any]]
    coverage: dict[str, int]
    defects: dict[str, int]
    verdicts: dict[str, int]
    journal_programs: int
    new_failures: int
    cluster: str
    duplicates: int = 0  # indices of this run whose program was drawn before: not checked again
    kernels: dict[str, Any] = field(default_factory=dict)  # kernel_oracle.kernel_summary, for this run
    interrupted: bool = False  # stopped by Ctrl-C (exit 130), before its budget ended

    @property
    def per_second(self) -> float:
        return self.programs / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"programs": self.programs, "per_second": round(self.per_second, 3), "failures": self.failures,
                "coverage": dict(sorted(self.coverage.items())), "defects": dict(sorted(self.defects.items())),
                "seconds": round(self.seconds, 2),
                # the truth of exit code 0 (CLI.md): a nightly run fails on new failures only
                "ok": not self.new_failures, "oracle": "pipeline", "campaign": self.campaign,
                "run": self.run, "verdicts": dict(sorted(self.verdicts.items())),
                "journal_programs": self.journal_programs, "new_failures": self.new_failures,
                "cluster": self.cluster, "duplicates": self.duplicates, "kernels": self.kernels}


@dataclass
class _Job:
    kind: str  # "generate", "check" or "reduce"
    index: int
    submitted: float
    key: str = ""  # the failure's signature key, for a reduction
    running: float | None = None  # when its worker was first seen processing it
    worker: str = ""
    attempt: int = 0
    deaths: int = 0  # how often its worker went away while it waited there (never seen running)
    choices: tuple[Any, ...] = ()  # a reduction's program
    signature: Signature | None = None

    @property
    def started(self) -> float:
        return self.running if self.running is not None else self.submitted


@dataclass
class _Run:
    journal: Journal
    settings: Settings
    run: int
    cluster: Cluster
    program_timeout: float
    reduce_budget: float
    checked: int = 0
    coverage: Counter[str] = field(default_factory=Counter)
    defects: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)
    new: int = 0
    pending: list[_Job] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # fingerprint → the first index drawn with it
    duplicates: int = 0
    kernel_verdicts: Counter[str] = field(default_factory=Counter)
    kernel_programs: int = 0  # programs whose kernels were verified
    false_alarms: int = 0
    interrupted: bool = False
    preload: tuple[str, ...] = ()  # what the workers import first (absolute where a file): reproduce.sh does too


def conflicting_options(kept: Settings, seed: int | None, verify: bool, gpu: bool) -> list[str]:
    """The options asking a campaign for other settings than it keeps (its programs are drawn
    from them, and its journal compares like with like)."""
    conflicts = []
    if seed is not None and seed != kept.seed:
        conflicts.append(f"--seed {seed} (it keeps seed {kept.seed})")
    if not verify and kept.verify:
        conflicts.append("--no-verify (it verifies)")
    if gpu and not kept.gpu:
        conflicts.append("--target gpu (it runs on the interpreter)")
    return conflicts


def _kept_settings(directory: Path, seed: int | None, verify: bool, gpu: bool) -> Settings | None:
    """The settings of the campaign already in `directory` (None: a new one), once the command
    line asks for nothing else: a conflicting option is refused before anything is written."""
    kept = Journal.existing(directory)  # (a directory that is not a campaign: refused here)
    if kept is None:
        return None
    conflicts = conflicting_options(kept, seed, verify, gpu)
    if conflicts:
        raise UsageError(f"the campaign in `{directory}` keeps the settings it was created with; "
                         f"{', '.join(conflicts)}: leave the option out to resume it, or start a new "
                         f"campaign in another directory")
    return kept


def _require_device(directory: Path) -> None:
    from verimim.runtime.cuda import device_available

    if not device_available():
        raise UsageError(f"the campaign in `{directory}` runs its programs on the GPU (it was created with "
                         f"--target gpu), and no CUDA device (or no cuda-python) is available here")


def run(directory: str | Path, budget_s: float, *, seed: int | None = None, verify: bool = True,
        gpu: bool = False, workers: int | None = None, scheduler: str | None = None,
        preload: tuple[str, ...] = (), processes: bool = True,
        program_timeout: float = DEFAULT_PROGRAM_TIMEOUT, reduce_budget: float = DEFAULT_REDUCE_BUDGET,
        max_programs: int | None = None, command: str = "",
        progress: Callable[[int, float, int], None] | None = None) -> RunSummary:
    """Run (or resume) the campaign in `directory` for `budget_s` seconds of new submissions
    (or `max_programs`)."""
    import random

    new_settings = Settings(seed if seed is not None else random.getrandbits(32), verify, gpu=gpu)
    d = Path(directory)
    # Refused before a cluster starts and before anything is written: a directory that is not a
    # campaign, options the campaign does not keep, a campaign another process is running.
    kept = _kept_settings(d, seed, verify, gpu)
    lock = Journal.lock(d) if kept is not None else None
    try:
        on_gpu = kept.gpu if kept is not None else gpu
        if on_gpu and not gpu:
            _require_device(d)  # (a fresh `--target gpu` was checked by the command line)
        # GPU campaigns on a local cluster: one worker per GPU (or per --workers), each its own GPU
        gpus = gpu_ids() if on_gpu and scheduler is None else ()
        cluster = connect(workers, scheduler, preload, processes, gpus)  # one that does not answer: before we write
        try:
            if scheduler is not None:
                _wait_for_a_worker(cluster, scheduler, min(budget_s, WORKER_WAIT))
            journal = Journal.open(directory, new_settings, validated=kept is not None)  # (validated once, above)
            lock = lock if lock is not None else Journal.lock(d)
        except BaseException:
            cluster.close()
            raise
        return _run_opened(journal, cluster, directory, budget_s, scheduler, program_timeout, reduce_budget,
                           max_programs, command, progress, preload)
    finally:
        if lock is not None:
            os.close(lock)


def _wait_for_a_worker(cluster: Cluster, scheduler: str, seconds: float) -> None:
    """A joined scheduler without workers would run the whole budget checking nothing, and end
    green: refused instead, before the journal is written."""
    try:
        cluster.client.wait_for_workers(1, timeout=seconds)
    except Exception:  # noqa: BLE001 — TimeoutError (distributed raises asyncio's or the builtin)
        raise UsageError(f"the Dask scheduler {scheduler} has no worker (none joined within {seconds:.0f} s); "
                         f"start one with `dask worker {scheduler}`") from None


def _run_opened(journal: Journal, cluster: Cluster, directory: str | Path, budget_s: float, scheduler: str | None,
                program_timeout: float, reduce_budget: float, max_programs: int | None, command: str,
                progress: Callable[[int, float, int], None] | None, preload: tuple[str, ...] = ()) -> RunSummary:
    try:
        settings = journal.settings
        try:
            r = _Run(journal, settings, journal.start_run(budget_s, cluster.slots(), scheduler, command), cluster,
                     program_timeout, reduce_budget, seen=journal.fingerprints(),
                     preload=tuple(str(Path(m).resolve()) if m.endswith(".py") else m for m in preload))
            _report_unreported(r)
            start = time.monotonic()
            try:
                _loop(r, start, budget_s, max_programs, progress)
            except KeyboardInterrupt:
                # Ctrl-C: what is journaled stays (a program being written is rolled back, and
                # checked again on resume); the run ends here and its summary is still printed.
                r.interrupted = True
                journal.roll_back_unfinished()
            journal.end_run(r.run)
            seconds = time.monotonic() - start
        finally:
            cluster.close()
        return RunSummary(str(directory), r.run, r.checked, seconds, list(r.failures.values()), dict(r.coverage),
                          dict(r.defects), dict(r.verdicts), journal.count(), r.new, cluster.description,
                          r.duplicates, kernel_summary(dict(r.kernel_verdicts), r.kernel_programs, r.false_alarms),
                          r.interrupted)
    finally:
        journal.close()


def _loop(r: _Run, start: float, budget_s: float, max_programs: int | None,
          progress: Callable[[int, float, int], None] | None) -> None:
    from distributed import wait

    todo = r.journal.todo()
    inflight: dict[Any, _Job] = {}
    submitted = 0
    pending = r.pending  # jobs waiting for a free worker: reductions, and programs to place again
    _restore_failure_dirs(r)
    # Failures of earlier runs whose reduction never finished (killed): reduce them now.
    for f in r.journal.failures():
        if f.reduce_status is None and f.signature.kind not in ("hang", "crash"):
            _queue_reduction(r, pending, f.key, f.first_idx)
    view, view_at = _View.of(r.cluster), time.monotonic()
    lonely: float | None = None  # since when no worker is connected

    def tick() -> None:
        """The progress display, on every turn (it prints every ten seconds, also while nothing
        finishes; hangs and crashes count as they are journaled)."""
        if progress is not None:
            progress(r.checked, time.monotonic() - start, len(r.failures))

    while True:
        tick()
        now = time.monotonic()
        if now - view_at > 1.0:
            view, view_at = _View.of(r.cluster), now
            _check_placement(r, inflight, pending, view, now)
        accepting = now - start < budget_s and (max_programs is None or submitted < max_programs)
        for worker in view.free(inflight, r.cluster.restarting):
            if pending:
                job = pending.pop(0)
            elif accepting and (max_programs is None or submitted < max_programs):
                job = _Job("generate", next(todo), now)
                submitted += 1
            else:
                break
            _submit(r, inflight, job, worker)
        if not inflight and not pending and not accepting:
            tick()
            return
        if not accepting and now - start > budget_s + _overtime(r):
            # Past the budget by more than any job may take: what is left (jobs no worker took)
            # is not journaled, and a resume does it (the journal's gaps).
            for fut in inflight:
                fut.cancel()
            logging.getLogger("verimim.fuzz").warning(
                "%d job(s) left unfinished %.0f s past the budget; a resume does them", len(inflight) + len(pending),
                now - start - budget_s)
            tick()
            return
        if not inflight:
            if view.nthreads:
                lonely = None
            elif lonely is None:
                lonely = now
            elif now - lonely > NO_WORKER_TIMEOUT:
                raise UsageError(f"no Dask worker connected to {r.cluster.description} for "
                                 f"{NO_WORKER_TIMEOUT:.0f} s")
            time.sleep(0.5)  # no worker free (all restarting): wait for one
            continue
        try:
            done, _ = cast(tuple[set[Any], set[Any]],  # (done, not done): synchronous, not a coroutine
                           wait(list(inflight), timeout=0.5, return_when="FIRST_COMPLETED"))
        except TimeoutError:
            done = set()
        for fut in done:
            job = inflight.pop(fut)
            _finished(r, fut, job, inflight)


def _overtime(r: _Run) -> float:
    """How long past its budget a run waits for its jobs: a program's time limit, twice (one not
    taken by its worker is placed again), and a reduction's budget."""
    return 2 * r.program_timeout + r.reduce_budget + 30.0


@dataclass(frozen=True)
class _View:
    """The workers now connected (address -> threads) and the task keys each is processing."""

    nthreads: dict[str, int]
    processing: dict[str, frozenset[str]]

    @staticmethod
    def of(cluster: Cluster) -> "_View":
        try:
            nthreads = dict(cluster.client.nthreads())
            processing = {a: frozenset(str(k) for k in ks) for a, ks in cluster.client.processing().items()}
        except Exception:  # noqa: BLE001 — the scheduler is busy (a restart): no worker this time
            return _View({}, {})
        return _View(nthreads, processing)

    def free(self, inflight: dict[Any, _Job], restarting: Collection[str] = ()) -> list[str]:
        """One entry per free thread. A worker is given a program only when it has nothing else
        to do, and not while it is being restarted (after a hang), so that its death or restart
        is charged to the program it ran and no other."""
        busy = Counter(j.worker for j in inflight.values())
        return [a for a, n in self.nthreads.items() if a not in restarting
                for _ in range(max(0, n - busy.get(a, 0)))]


def _submit(r: _Run, inflight: dict[Any, _Job], job: _Job, worker: str) -> None:
    job.attempt += 1
    job.worker, job.running, job.submitted = worker, None, time.monotonic()
    key = f"verimim-{job.kind}-{r.run}-{job.key or job.index}-{job.attempt}"
    if job.kind == "generate":
        fut = r.cluster.client.submit(generate_index, r.settings, job.index, key=key, pure=False,
                                      workers=[worker], allow_other_workers=False)
    elif job.kind == "check":
        fut = r.cluster.client.submit(check_index, r.settings, job.index, key=key, pure=False,
                                      workers=[worker], allow_other_workers=False)
    else:
        fut = r.cluster.client.submit(reduce_index, r.settings, job.choices, job.signature, r.reduce_budget,
                                      key=key, pure=False, workers=[worker], allow_other_workers=False)
    inflight[fut] = job


def _check_placement(r: _Run, inflight: dict[Any, _Job], pending: list[_Job], view: _View, now: float) -> None:
    """Jobs whose worker went away, and jobs past their time limit (hangs)."""
    jobs_on = Counter(j.worker for j in inflight.values())
    for fut, job in list(inflight.items()):
        if job.running is None and str(fut.key) in view.processing.get(job.worker, ()):
            job.running = now
        limit = r.program_timeout + (r.reduce_budget if job.kind == "reduce" else 0.0)
        if view.nthreads and job.worker not in view.nthreads and fut.status == "pending":
            # Its worker is gone. While running it: a crash (KilledWorker usually says so first).
            # Before it was seen running (a poll a second apart misses a program that kills its
            # worker at once, and a joined scheduler retries it elsewhere before saying
            # KilledWorker): placed again, unless its workers died under it twice as their only
            # job, or three times (a job placed again under a new key forever kept a campaign
            # on a joined cluster from recording the crash, and from ending).
            del inflight[fut]
            fut.cancel()
            if job.running is None:
                job.deaths += 1
                if job.deaths < (2 if jobs_on[job.worker] == 1 else 3):
                    pending.insert(0, job)
                    continue
            why = ("its worker died while checking it" if job.running is not None
                   else f"its workers died {job.deaths} times while it was placed there")
            if job.kind != "reduce":
                _journal(r, lost(r.settings, job.index, "crash", _died(r, why), job.worker, now - job.started, job.kind))
            else:
                r.journal.reduced(job.key, *_sizes_of(r, job.key), now - job.started, "crash")
        elif job.running is None and now - job.submitted > limit and fut.status == "pending":
            # Its worker never took it (a worker wedged outside any program): it is placed again,
            # on a worker restarted, and nothing is journaled for it.
            del inflight[fut]
            fut.cancel()
            r.cluster.restart_worker(job.worker)
            pending.insert(0, job)
        elif job.running is not None and now - job.running > limit and fut.status == "pending":
            del inflight[fut]
            restarted = r.cluster.restart_worker(job.worker)
            fut.cancel()
            note = "" if restarted else " (its worker could not be restarted)"
            if job.kind != "reduce":
                _journal(r, lost(r.settings, job.index, "hang", f"no result after {limit:.0f} s{note}", job.worker,
                                 now - job.started, job.kind))
            else:
                r.journal.reduced(job.key, *_sizes_of(r, job.key), now - job.started, "hang")


def _finished(r: _Run, fut: Any, job: _Job, inflight: dict[Any, _Job]) -> None:
    try:
        result: Any = fut.result()
        error = None
    except Exception as e:  # noqa: BLE001 — KilledWorker (a dead worker) or an error of the task itself
        result, error = None, e
    if job.kind == "reduce":
        _reduced(r, job, result, error)
        return
    if error is not None:
        why = f"{type(error).__name__}: {error}"
        _journal(r, lost(r.settings, job.index, "crash", _died(r, why) if type(error).__name__ == "KilledWorker"
                         else why, job.worker, time.monotonic() - job.started, job.kind))
        return
    if job.kind == "generate":
        _drawn(r, result, job, inflight)
        return
    _journal(r, result)


def _died(r: _Run, message: str) -> str:
    """A crash's message, led by what the nanny saw (an exit status, a signal, memory)."""
    note = r.cluster.death_note()
    return f"{note}; {message}" if note else message


def _drawn(r: _Run, g: Generated, job: _Job, inflight: dict[Any, _Job]) -> None:
    """A program drawn: journaled as a duplicate of the first with its fingerprint, or checked
    next, on the worker that drew it (its thread is free now, and it kept the program)."""
    first = r.seen.get(g.fingerprint)
    if first is not None and first != g.index:
        if r.journal.record_duplicate(r.run, g.index, first, g.fingerprint):
            r.duplicates += 1
        return
    r.seen[g.fingerprint] = g.index
    _submit(r, inflight, _Job("check", g.index, time.monotonic()), job.worker)


def _journal(r: _Run, c: Checked) -> None:
    sig = c.signature
    new_dir = None
    if sig is not None and not r.journal.known(sig.key):
        new_dir = _write_failure(r, c, sig)
    if not r.journal.record(r.run, c, new_dir):
        return  # journaled by an earlier run already (a resubmitted gap that had finished after all)
    r.checked += 1
    r.coverage.update(c.features)
    r.verdicts[c.verdict] += 1
    r.kernel_verdicts.update(dict(c.kernel_verdicts))
    r.kernel_programs += any(stage == "kernels" for stage, _ in c.times)
    r.false_alarms += sig is not None and is_false_alarm(sig.phase, sig.kind)
    if c.defect:
        r.defects[c.defect] += 1
    if sig is None:
        return
    d = r.journal.dir / "failures" / sig.key
    entry = r.failures.setdefault(sig.key, {"kind": sig.kind, "file": str(d / "original.mim"),
                                            "message": c.message, "signature": sig.to_json(),
                                            "new": new_dir is not None, "count": 0, "index": c.index})
    entry["count"] += 1
    if new_dir is not None:
        r.new += 1
        if sig.kind not in ("hang", "crash"):  # re-running those in the reducer would hang or crash it
            _queue_reduction(r, r.pending, sig.key, c.index)
        else:
            r.journal.reduced(sig.key, *size(c.text), 0.0, f"not reduced ({sig.kind})")


def _report_unreported(r: _Run) -> None:
    """Failures a killed run found and never reported are this run's new ones: a nightly job
    killed after it found a bug must not leave the next night green."""
    for f in r.journal.unreported(r.run):
        first = r.journal.program(f.first_idx)
        r.failures[f.key] = {"kind": f.signature.kind, "file": str(r.journal.failure_dir(f.dir) / "original.mim"),
                             "message": (first or {}).get("message") or "", "signature": f.signature.to_json(),
                             "new": True, "count": 0, "index": f.first_idx,
                             "found_by": f"run {f.first_run}, which ended before it reported it"}
        r.new += 1


def _write_failure(r: _Run, c: Checked, sig: Signature) -> str:
    d = r.journal.dir / "failures" / sig.key
    d.mkdir(parents=True, exist_ok=True)
    (d / "original.mim").write_text(reproducer(c.text, c.args, c.expected, c.features), encoding="utf-8")
    cmd = reproduce_command(sig, "original.mim", c.args)
    (d / "reproduce.sh").write_text(f"#!/bin/sh\n# {sig.kind}: {c.message}\ncd \"$(dirname \"$0\")\"\n"
                                    f"{preloading(r.preload)}{cmd}\n", encoding="utf-8")
    (d / "reproduce.sh").chmod(0o755)
    (d / "failure.json").write_text(json.dumps({
        "signature": sig.to_json(), "key": sig.key, "index": c.index, "seed": str(c.seed), "defect": c.defect,
        "message": c.message, "command": cmd, "args": list(c.args), "size": c.size,
        "choices_of": f"journal.sqlite, programs.idx = {c.index}", "preload": list(r.preload)}, indent=2),
        encoding="utf-8")
    return str(d.relative_to(r.journal.dir))  # journaled relative to DIR: see Journal.failure_dir


def _restore_failure_dirs(r: _Run) -> None:
    """A failure whose directory went missing (deleted, or the campaign copied without it) is
    written again from the journal: its first program regenerated from its seed, its journaled
    message, and a new reduction. Otherwise the report and this run's summary would point at
    files that are not there."""
    from verimim.driver import run_with_big_stack

    for f in r.journal.failures():
        d = r.journal.failure_dir(f.dir)
        if (d / "original.mim").exists():
            continue
        row = r.journal.program(f.first_idx)
        if row is None:
            continue
        c = run_with_big_stack(lambda: lost(r.settings, f.first_idx, f.signature.kind, "", "", 0.0))
        c = replace(c, signature=f.signature, verdict=str(row["verdict"]), message=str(row["message"] or ""))
        _write_failure(r, c, f.signature)
        if f.signature.kind not in ("hang", "crash"):
            r.journal.reduction_lost(f.key)


def _queue_reduction(r: _Run, pending: list[_Job], key: str, index: int) -> None:
    if r.reduce_budget <= 0:
        return  # `--reduce-budget 0`: no reduction now; the failure stays pending for a resume
    row = r.journal.program(index)
    failure = next((f for f in r.journal.failures() if f.key == key), None)
    if row is None or failure is None:
        return
    pending.append(_Job("reduce", index, time.monotonic(), key, choices=choices_from_json(row["choices"]),
                        signature=failure.signature))


def _reduced(r: _Run, job: _Job, red: Any, error: BaseException | None) -> None:
    d = r.journal.dir / "failures" / job.key
    if error is not None or red is None:
        r.journal.reduced(job.key, *_sizes_of(r, job.key), time.monotonic() - job.started,
                          f"reducer failed: {type(error).__name__}: {error}"[:300])
        return
    if red.status == "not reproducible":
        # (the failure no longer shows, a fix since the run that found it): no reduced.mim that
        # does not fail, and one made by an earlier attempt stays
        r.journal.reduced(job.key, *_sizes_of(r, job.key), red.seconds, red.status)
        return
    meta = json.loads((d / "failure.json").read_text(encoding="utf-8")) if (d / "failure.json").exists() else {}
    args = tuple(red.args)
    sig = Signature.from_json(meta.get("signature", {"kind": ""}))
    # The reduction keeps the failure's signature, not the injected defect: a reduced program
    # says EXPECT-ERROR only for a missed defect (what it is about); a phase's E-SPEC reduced from
    # a racy program may have lost its race (its test would expect a fault it no longer has).
    expected = _expected_of(d) if sig.kind == "missed-defect" else ()
    (d / "reduced.mim").write_text(reproducer(red.text, args, expected, ()), encoding="utf-8")
    script = d / "reproduce.sh"
    # one line for the reduced program, also when a killed reduction is done again
    kept = script.read_text(encoding="utf-8").split(_REDUCED_MARK, 1)[0] if script.exists() else ""
    script.write_text(f"{kept}{_REDUCED_MARK} ({red.size_before} -> {red.size_after} characters):\n"
                      f"{reproduce_command(sig, 'reduced.mim', args)}\n", encoding="utf-8")
    r.journal.reduced(job.key, red.size_after, red.lines_after, red.seconds, red.status)


_REDUCED_MARK = "# the reduced program"


def _sizes_of(r: _Run, key: str) -> tuple[int, int]:
    for f in r.journal.failures():
        if f.key == key:
            return f.size_before or 0, f.lines_before or 0
    return 0, 0


def _expected_of(d: Path) -> tuple[str, ...]:
    p = d / "original.mim"
    if not p.exists():
        return ()
    return tuple(ln.split(":", 1)[1].strip() for ln in p.read_text(encoding="utf-8").splitlines()
                 if ln.startswith("// EXPECT-ERROR:"))


def reproducer(text: str, args: tuple[str, ...], expected: tuple[str, ...], features: tuple[str, ...]) -> str:
    """A `.mim` file with the annotations tests/programs reads (as GeneratedProgram.write)."""
    lines = [f"// generated by verimim fuzz; features: {', '.join(sorted(features))}" if features
             else "// reduced by verimim fuzz"]
    if args:
        lines.append(f"// ARGS: {shlex.join(args)}")  # (read back as a shell splits it: tests/programs)
    lines += [f"// EXPECT-ERROR: {c}" for c in sorted(expected)]
    return "\n".join(lines) + "\n" + text


# `python -c` of reproduce.sh's `verimim` where the workers had preloads: PRELOAD... -- ARGS...
_PRELOADING = ('import importlib, runpy, sys; i = sys.argv.index("--"); '
               '[runpy.run_path(m) if m.endswith(".py") else importlib.import_module(m) for m in sys.argv[1:i]]; '
               'from verimim.cli import main; main(sys.argv[i + 1:])')


def preloading(preload: tuple[str, ...]) -> str:
    """The lines of reproduce.sh that make its `verimim` import the campaign's `--preload`
    modules first, as the workers that found the failure did ('' without any): a phase broken
    on purpose, or a plugin registered, by a preload is not there for a plain `verimim`, whose
    commands then showed nothing."""
    if not preload:
        return ""
    mods = " ".join(shlex.quote(m) for m in preload)
    return (f"# the workers imported --preload {mods} first: so does verimim here\n"
            f"verimim() {{ {shlex.quote(sys.executable)} -c {shlex.quote(_PRELOADING)} {mods} -- \"$@\"; }}\n")


def reproduce_command(sig: Signature, file: str, args: tuple[str, ...]) -> str:
    """The verimim command that shows a failure of this signature."""
    a = "".join(f" {shlex.quote(x)}" for x in args)
    if sig.kind == "diff":
        return f"verimim check {file} && verimim diff {file}{a}"
    if sig.phase in ("interp", "schedules"):
        return f"verimim check {file} && verimim run {file}{a}"
    if sig.kind in ("hang", "crash"):
        # every stage, whatever the one before says (an injected defect makes `check` exit 1):
        # which one hung or crashed is not known
        return f"verimim dump {file} >/dev/null; verimim check {file}; verimim diff {file}{a}"
    if sig.kind == "roundtrip":
        return f"verimim dump {file} && verimim check {file} && verimim diff {file}{a}"
    if sig.kind == "reproducer":
        # check's refutation is what it should be; the counterexample's own `run` line is what
        # fails (it does not report the code): run each, echoed (set -x), in this shell, whose
        # `verimim` imports the preloads (a child `sh` would not have that function)
        return (f"verimim check {file}; runs=$(verimim check {file} --json 2>/dev/null | {shlex.quote(sys.executable)} -c "
                f"{shlex.quote(_COUNTEREXAMPLE_RUNS)}); set -x; eval \"$runs\"")
    return f"verimim check {file}"


# prints the `run` line of every counterexample in `check --json` (the walk judge makes)
_COUNTEREXAMPLE_RUNS = ("import json, sys\n"
                        "from verimim.fuzz.kernel_oracle import counterexample_parts\n"
                        "for e in json.load(sys.stdin).get('kernels') or []:\n"
                        "    print(*(p['run'] for p in counterexample_parts(e) if p.get('run')), sep='\\n')\n")
