"""The campaign side of `verimim fuzz` (spec/CLI.md): `fuzz --campaign DIR` and `fuzz report DIR`.

The click definitions stay in verimim/cli.py with the other commands; what they print and
their exit codes are here, next to the campaign they describe. A bad campaign directory, a
foreign or corrupt journal, a scheduler that does not answer: `UsageError`, which the command
line turns into exit 2 with the message (nothing in the directory is written before that).
"""
from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click

from verimim.diagnostics import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK
from verimim.driver import shell_command


def campaign(directory: str, budget: float, *, seed: int | None, verify: bool, gpu: bool, workers: int | None,
             scheduler: str | None, preload: tuple[str, ...], program_timeout: float, reduce_budget: float,
             as_json: bool, complete: Callable[[dict[str, Any]], dict[str, Any]],
             progress: Callable[[int, float, int], None] | None = None, max_programs: int | None = None) -> int:
    """Run or resume the campaign; print the run's summary; return the exit code."""
    from verimim.fuzz.campaign import run

    with terminate_as_interrupt():
        summary = run(directory, budget, seed=seed, verify=verify, gpu=gpu, workers=workers, scheduler=scheduler,
                      preload=preload, program_timeout=program_timeout, reduce_budget=reduce_budget,
                      command=" ".join(sys.argv), progress=progress, max_programs=max_programs)
    if summary.interrupted and not summary.new_failures:
        code = EXIT_INTERRUPTED
    else:
        # A nightly job fails on what is new: a failure whose signature the journal already held
        # is reported (known) but does not fail the run again.
        code = EXIT_INTERNAL if summary.new_failures else EXIT_OK
    obj = summary.to_json()
    obj["ok"] = code == EXIT_OK  # (CLI.md: the truth of exit code 0; Ctrl-C is 130, not ok)
    obj["interrupted"] = summary.interrupted
    for f in summary.failures:
        tag = "new" if f["new"] else "known"
        click.echo(f"failure[{f['kind']}] ({tag}, {f['count']}x): {f['message']}\n  in {f['file'].rsplit('/', 1)[0]}/ "
                   f"(reproduce.sh)", err=True)
    if as_json:
        obj.update(file=None, diagnostics=[])
        click.echo(json.dumps(complete(obj), ensure_ascii=False))
    else:
        click.echo(f"{summary.programs} programs in {summary.seconds:.1f} s ({summary.per_second:.2f}/s) on "
                   f"{summary.cluster}, {len(summary.failures)} failures ({summary.new_failures} new); "
                   f"the journal holds {summary.journal_programs} programs", err=True)
        click.echo(f"  verdicts: {', '.join(f'{k} {v}' for k, v in sorted(summary.verdicts.items()))}", err=True)
        k = summary.kernels
        click.echo(f"  kernels: {k['kernels']} verified ({', '.join(f'{n} {s}' for s, n in k['verdicts'].items()) or 'none'}), "
                   f"{k['false_alarms']} false alarms", err=True)
        click.echo(f"  report: {shell_command(['verimim', 'fuzz', 'report', directory])}", err=True)
    if summary.interrupted:
        click.echo(f"interrupted: the journal keeps the {summary.programs} programs this run checked; resume with "
                   f"{shell_command(['verimim', 'fuzz', '--campaign', directory])}", err=True)
    return code


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (`kill`, `timeout`, systemd stopping the service) ends a run as Ctrl-C does: the
    run is ended in the journal and its summary printed, exit 130. By default it killed the
    process as `kill -9` does: nothing journaled was lost, but the run had no end and no summary.
    (Only the main thread may set a handler: a campaign run from another keeps the default.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def report(directory: str, as_json: bool, complete: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Write DIR/report.html and DIR/report.json; print the summary (all of it with --json)."""
    from verimim.fuzz.report import write_report

    summary, html_path, json_path = write_report(directory)
    if as_json:
        obj = dict(summary, file=None, ok=True, diagnostics=[])
        click.echo(json.dumps(complete(obj), ensure_ascii=False))
    else:
        click.echo(f"{summary['programs']} programs in {len(summary['runs'])} runs, "
                   f"{len(summary['failures'])} distinct failures", err=True)
        click.echo(f"wrote {html_path}\nwrote {json_path}", err=True)
    return EXIT_OK

