"""`verimim fuzz report DIR`: DIR/report.json (the summary) and DIR/report.html (one
self-contained page: inline SVG plots and tables, no script, nothing fetched).

What it shows: programs per second over time (each run a line), coverage of every seed
operation (the operations of the core, mem, gpu and buffer plugins; never generated ones
first, in red), every phase by verdict status, every oracle verdict, the failure table
(signature, count, reproducer, sizes before and after reduction), and the latest run compared
with the one before it.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from verimim.fuzz.journal import Journal

STATUSES = ("proved", "bounded", "validated", "refuted", "unknown", "skipped", "rejected")  # spec/CLI.md
# every verdict a program gets: `ok` or its failure's kind (`reproducer`: a counterexample of
# check's whose `verimim run` command does not report the code, fuzz/kernel_oracle.judge)
VERDICTS = ("ok", "spec", "diff", "internal", "false-positive", "missed-defect", "reproducer", "roundtrip", "hang",
            "crash")
_SEED_PLUGINS = ("core", "mem", "gpu", "buffer", "btensor")
# Operations only a phase makes (what buffer.lower_ptr makes of `buffer.copy`): a program's
# coverage is of what it is written with, so they would show as never generated in every campaign.
_PHASE_MADE = frozenset({"buffer.ptr_copy"})


def seed_operations() -> list[str]:
    """Every operation the seed plugins declare: annexes (axioms, and functions written in Mim
    such as `gpu.synced_scope`) of a function type that are neither type constructors
    (`mem.M: Nat → *`) nor phases and passes (`… → compile.Pass`). Each once, by its own
    name: an alias (core.mim's upstream spellings, `core.icmp.XygLe` for `core.icmp.ul`) names
    the same operation, which a program's World holds under that name only."""
    from verimim.fuzz.strategies import fresh_world
    from verimim.ir.defs import Pi

    w = fresh_world([f"plugin {p};" for p in _SEED_PLUGINS])
    out = []
    for name, d in w.annexes.items():
        if name.split(".")[0] not in _SEED_PLUGINS or getattr(d, "annex", name) != name or name in _PHASE_MADE:
            continue
        t = w.type_of(d)
        shown = str(t)
        if not isinstance(t, Pi) or shown.endswith("→ *>") or "compile." in shown:
            continue
        out.append(name)
    return sorted(out)


def summarize(journal: Journal) -> dict[str, Any]:
    progs = journal.programs()
    runs = journal.runs()
    ops = seed_operations()
    features: Counter[str] = Counter()
    phases: dict[str, Counter[str]] = {}
    from verimim.phases.pipeline import PHASES

    for name in sorted(PHASES):
        phases[name] = Counter()
    verdicts: Counter[str] = Counter({v: 0 for v in VERDICTS})
    for p in progs:
        features.update(json.loads(p["features"]))
        verdicts[p["verdict"]] += 1
        for name, status in json.loads(p["phases"] or "[]"):
            phases.setdefault(name.split("[")[0], Counter())[status] += 1
    run_rows = [_run_row(r, [p for p in progs if p["run"] == r["id"]], journal.duplicates(r["id"])) for r in runs]
    if run_rows and not run_rows[-1]["complete"] and Journal.in_use(journal.dir):
        run_rows[-1]["running"] = True  # (not killed: a report written while the run goes on)
    failures = []
    for f in journal.failures():
        d = journal.failure_dir(f.dir)
        meta = _read_json(d / "failure.json")
        if not meta:  # its directory is missing (a resume writes it again): the journal's message
            first = journal.program(f.first_idx) or {}
            meta = {"message": f"{first.get('message') or ''} (the directory {d} is missing: resuming the "
                               f"campaign writes it again)".lstrip()}
        failures.append({
            "signature": f.key, **f.signature.to_json(), "count": f.count, "first_index": f.first_idx,
            "first_run": f.first_run, "message": meta.get("message", ""), "dir": str(d),
            "original": str(d / "original.mim"), "reduced": str(d / "reduced.mim") if (d / "reduced.mim").exists() else None,
            "command": meta.get("command", ""), "size_before": f.size_before, "size_after": f.size_after,
            "lines_before": f.lines_before, "lines_after": f.lines_after, "reduce_s": f.reduce_s,
            "reduce_status": f.reduce_status,
        })
    coverage = {"operations": {op: features.get(op, 0) for op in ops},
                "features": {k: v for k, v in sorted(features.items()) if k not in ops}}
    return {
        "campaign": str(journal.dir), "programs": len(progs), "duplicates": journal.duplicates(), "runs": run_rows,
        "throughput": [pt for r in runs for pt in _throughput(r, [p for p in progs if p["run"] == r["id"]])],
        "coverage": coverage,
        "phases": {k: {s: v.get(s, 0) for s in STATUSES} for k, v in phases.items()},
        "verdicts": dict(verdicts), "failures": failures, "comparison": _compare(run_rows, progs),
        "settings": journal.settings.to_json(),
    }


def _run_row(r: dict[str, Any], progs: list[dict[str, Any]], duplicates: int) -> dict[str, Any]:
    ended = r["ended"] or (max((p["finished"] for p in progs), default=r["started"]))
    seconds = max(ended - r["started"], 1e-9)
    sigs = Counter(p["signature"] for p in progs if p["signature"])
    return {"id": r["id"], "started": _iso(r["started"]), "ended": _iso(ended) if ended else None,
            "complete": r["ended"] is not None, "running": False,
            # (a run of `--programs N` alone has no time limit: its budget is infinite, JSON's null)
            "budget": r["budget"] if r["budget"] is None or math.isfinite(r["budget"]) else None,
            "workers": r["workers"],
            "scheduler": r["scheduler"], "programs": len(progs), "duplicates": duplicates,
            "seconds": round(seconds, 1),
            "per_second": round(len(progs) / seconds, 3), "per_second_per_worker":
            round(len(progs) / seconds / max(r["workers"] or 1, 1), 3),
            "failures": dict(sigs), "verdicts": dict(Counter(p["verdict"] for p in progs))}


def _throughput(r: dict[str, Any], progs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Programs per second in about 20 equal intervals of the run (at least 5 s each); the last
    one ends with the run (its programs over its own length, not a whole interval's)."""
    if not progs:
        return []
    t0 = r["started"]
    last = max(p["finished"] for p in progs)
    end = max(r["ended"] or last, last)
    width = max(5.0, (last - t0) / 20)
    buckets: Counter[int] = Counter(int((p["finished"] - t0) // width) for p in progs)
    out = []
    for b in range(max(buckets) + 1):
        upto = min((b + 1) * width, end - t0)
        span = max(upto - b * width, 1e-3)
        out.append({"run": r["id"], "t": round(upto, 1), "per_second": round(buckets.get(b, 0) / span, 3)})
    return out


def _compare(runs: list[dict[str, Any]], progs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest run against the one before it (the previous night's) that checked programs: a
    run killed before it checked any (it only reduced what an earlier one found, or it was
    stopped at its start) has no coverage or rate to compare, and every feature was "newly
    covered" against it."""
    if len(runs) < 2:
        return None
    last = runs[-1]
    prev = next((r for r in reversed(runs[:-1]) if r["programs"]), runs[-2])

    def covered(run_id: int) -> set[str]:
        return {f for p in progs if p["run"] == run_id for f in json.loads(p["features"])}

    c_prev, c_last = covered(prev["id"]), covered(last["id"])
    seen_before = {p["signature"] for p in progs if p["signature"] and p["run"] < last["id"]}
    return {"previous": prev["id"], "latest": last["id"],
            "programs": [prev["programs"], last["programs"]],
            "per_second": [prev["per_second"], last["per_second"]],
            "failures": [sum(prev["failures"].values()), sum(last["failures"].values())],
            "new_signatures": sorted(set(last["failures"]) - seen_before),
            "gone_signatures": sorted(set(prev["failures"]) - set(last["failures"])),
            "newly_covered": sorted(c_last - c_prev), "no_longer_covered": sorted(c_prev - c_last)}


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _read_json(p: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def write_report(directory: str | Path) -> tuple[dict[str, Any], Path, Path]:
    """Write report.json and report.html into the campaign directory (nothing else is touched)."""
    from verimim.diagnostics import UsageError
    from verimim.fuzz.report_html import render_html

    d = Path(directory)
    journal = Journal.open(directory, read_only=True)
    if not os.access(d, os.W_OK):  # found before the work, not after it
        journal.close()
        raise UsageError(f"cannot write the report into `{d}`: the directory is not writable (a read-only "
                         f"file system or its permissions)")
    try:
        summary = summarize(journal)
    finally:
        journal.close()
    html_path, json_path = d / "report.html", d / "report.json"
    summary["report"] = str(html_path)
    texts = {html_path: render_html(summary), json_path: json.dumps(summary, indent=1, ensure_ascii=False) + "\n"}
    for path in texts:  # both or neither: one that cannot be written is found before either is
        if path.is_dir():
            raise UsageError(f"cannot write the report: `{path}` is a directory")
    for path, text in texts.items():
        try:
            _replace(path, text)
        except OSError as e:  # the report's fault, not the campaign's (its journal is fine)
            raise UsageError(f"cannot write the report `{path}`: {e.strerror or e}") from None
    return summary, html_path, json_path


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a report killed mid-write, as a timer's stop may, keeps
    the previous one instead of a truncated file)."""
    _remove_abandoned(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


ABANDONED_AFTER_S = 600.0  # a temporary file this old, of a process gone, was left by a kill


def _remove_abandoned(path: Path) -> None:
    """Remove the temporary files of `path` that a writer killed between its write and its
    rename left behind (`.report.html.PID.tmp` in the campaign directory): those of a process
    that no longer runs here, and old enough that no writer on another machine sharing the
    directory can still be at work on one."""
    now = time.time()
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:-len(".tmp")]
        if not pid.isdigit() or _running(int(pid)):
            continue
        try:
            if now - tmp.stat().st_mtime >= ABANDONED_AFTER_S:
                tmp.unlink()
        except OSError:
            pass  # (gone already, or not ours to remove: the report is written all the same)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # (another user's process: running)
    return True
