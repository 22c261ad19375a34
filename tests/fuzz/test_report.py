"""`fuzz report` (verimim.fuzz.report) on a journal written here: every program counted once,
coverage of every seed operation (the never generated ones included), every phase by status,
every verdict, the failure table, and the comparison of the last run with the one before."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from verimim.fuzz.journal import Journal
from verimim.fuzz.report import STATUSES, VERDICTS, seed_operations, write_report
from verimim.fuzz.report_html import RUN_COLORS
from verimim.fuzz.signature import Signature
from verimim.fuzz.task import Checked, Settings

SPEC = Signature("spec", "E-SPEC", "gpu.remove_double_syncs")
CRASH = Signature("crash")


def _c(index: int, features: tuple[str, ...], sig: Signature | None = None,
       phases: tuple[tuple[str, str], ...] = (("gpu.split_apply", "proved"),)) -> Checked:
    return Checked(index, index, (0,), defect=None, features=features, ops=2, kernels=1, launches=1, size=50,
                   verdict=sig.kind if sig else "ok", signature=sig, message=f"m{index}", phases=phases,
                   text="plugin core;\nlet x = 1;\n", finished=time.time() + index)


def _campaign(d: Path) -> None:
    j = Journal.open(d, Settings(seed=1))
    r1 = j.start_run(10, 1, None, "first")
    j.record(r1, _c(0, ("gpu.launch", "mem.load")))
    j.record(r1, _c(1, ("gpu.launch",), SPEC, (("gpu.split_apply", "proved"), ("gpu.remove_double_syncs", "refuted"))),
             failure_dir=str(d / "failures" / SPEC.key))
    j.end_run(r1)
    r2 = j.start_run(10, 2, None, "second")
    j.record(r2, _c(2, ("gpu.launch", "gpu.sync_work_items"), SPEC))
    j.record(r2, _c(3, ("gpu.launch",), CRASH, ()), failure_dir=str(d / "failures" / CRASH.key))
    j.record(r2, _c(4, ("gpu.launch", "branch.item")))
    j.reduced(SPEC.key, 10, 1, 2.0, "fixpoint")
    j.end_run(r2)
    j.close()


def test_seed_operations_name_each_operation_once_aliases_left_out() -> None:
    """core.mim's upstream spellings (`core.icmp.XygLe` is `core.icmp.ul`) are aliases: a
    program's World holds the operation under its own name, so an alias listed beside it would
    show as never generated in every campaign."""
    ops = seed_operations()
    assert "core.icmp.ul" in ops and "core.ncmp.l" in ops and "core.extrema.smin" in ops
    assert not {"core.icmp.XygLe", "core.ncmp.gLe", "core.extrema.Sm", "core.icmp.xyglE"} & set(ops)
    assert len(ops) == len(set(ops))
    assert "gpu.alloc_copy.block" in ops and "gpu.synced_scope" in ops  # functions written in Mim stay


def test_report_counts_and_compares(tmp_path: Path) -> None:
    _campaign(tmp_path)
    summary, html_path, json_path = write_report(tmp_path)
    assert summary["programs"] == 5 and json.loads(json_path.read_text())["programs"] == 5
    assert [r["programs"] for r in summary["runs"]] == [2, 3]
    ops = summary["coverage"]["operations"]
    assert set(ops) == set(seed_operations()), "every seed operation is listed"
    assert ops["gpu.launch"] == 5 and ops["mem.load"] == 1 and ops["gpu.sync_work_items"] == 1
    assert ops["gpu.with_streams"] == 0 and ops["core.wrap.shl"] == 0, "never generated: listed with 0"
    assert "branch.item" in summary["coverage"]["features"] and "branch.item" not in ops
    assert summary["verdicts"] == {**{v: 0 for v in VERDICTS}, "ok": 2, "spec": 2, "crash": 1}
    assert summary["phases"]["gpu.remove_double_syncs"]["refuted"] == 1
    assert set(summary["phases"]["gpu.split_apply"]) == set(STATUSES)
    assert summary["phases"]["gpu.split_apply"]["proved"] == 4
    failures = {f["kind"]: f for f in summary["failures"]}
    assert failures["spec"]["count"] == 2 and failures["spec"]["size_after"] == 10
    assert failures["spec"]["first_run"] == 1 and failures["crash"]["count"] == 1
    c = summary["comparison"]
    assert c["programs"] == [2, 3] and c["failures"] == [1, 2]
    assert c["new_signatures"] == [CRASH.key], "a signature of the previous run is not new"
    assert c["newly_covered"] == ["branch.item", "gpu.sync_work_items"] and c["no_longer_covered"] == ["mem.load"]
    page = html_path.read_text()
    for needle in ("<svg id='throughput'", "<table id='failures'>", "<table id='coverage'>", "<table id='phases'>",
                   "<svg id='verdicts'", SPEC.key, "Comparison with the previous run"):
        assert needle in page
    assert page.count("<polyline class='run'") == 2, "one line per run"


def test_report_of_a_single_run_has_no_comparison(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=1))
    run = j.start_run(1, 1, None, "")
    j.record(run, _c(0, ("gpu.launch",)))
    j.close()  # killed: the run never ended
    summary, html_path, _ = write_report(tmp_path)
    assert summary["comparison"] is None and summary["runs"][0]["complete"] is False
    assert "nothing to compare" in html_path.read_text() and "(killed)" in html_path.read_text()


def test_a_run_in_progress_is_running_not_killed(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=1))
    run = j.start_run(1, 1, None, "")
    j.record(run, _c(0, ("gpu.launch",)))
    lock = Journal.lock(tmp_path)  # (what `fuzz --campaign` holds while it runs)
    try:
        summary, html_path, _ = write_report(tmp_path)
    finally:
        import os

        os.close(lock)
        j.close()
    assert summary["runs"][0]["running"] is True and summary["runs"][0]["complete"] is False
    assert "(running)" in html_path.read_text() and "(killed)" not in html_path.read_text()


def test_the_last_interval_of_throughput_is_as_long_as_the_run_left_it() -> None:
    # 12 programs in a 21.9 s run: intervals of 5 s; the last one, 20..21.9 s, holds 2 programs:
    # 2 / 1.9 s, not 2 / 5 s (the plot showed the run slowing down at its end)
    from verimim.fuzz.report import _throughput

    progs = [{"finished": 100.0 + t} for t in (1, 2, 4, 6, 7, 9, 11, 12, 15, 17, 20.5, 21.9)]
    pts = _throughput({"id": 1, "started": 100.0, "ended": 121.9}, progs)
    assert [p["t"] for p in pts] == [5.0, 10.0, 15.0, 20.0, 21.9]
    assert pts[0]["per_second"] == 0.6 and pts[-1]["per_second"] == round(2 / 1.9, 3)


def test_failure_verdicts_have_red_bars_and_ok_a_blue_one(tmp_path: Path) -> None:
    import re

    _campaign(tmp_path)
    _, html_path, _ = write_report(tmp_path)
    svg = re.search(r"<svg id='verdicts'.*?</svg>", html_path.read_text()).group(0)  # type: ignore[union-attr]
    fills = dict(re.findall(r">([a-z-]+)</text><rect [^>]*fill='(#[0-9a-f]+)'", svg))
    assert fills["ok"] == "#4a90d9" and fills["spec"] == fills["crash"] == "#d62728"


def test_btensor_operations_are_seed_operations_of_the_coverage() -> None:
    assert {"btensor.map_reduce", "btensor.map_reduce_post"} <= set(seed_operations())


# ---------------------------------------------------------------- in a real (headless) browser

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) pixels of an 8-bit, non-interlaced PNG (what Chromium
    writes), decoded with the standard library only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6) and chunk[12] == 0, "an 8-bit RGB(A) PNG"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if channels == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
        prev = line
    return width, height, rows


@pytest.mark.skipif(_browser() is None, reason="no Chromium or Chrome on this machine")
def test_report_html_shows_its_plots_and_tables_in_a_headless_browser(tmp_path: Path) -> None:
    _campaign(tmp_path)
    _summary, html_path, _ = write_report(tmp_path)
    browser = _browser()
    assert browser is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,2400"]
    dom = subprocess.run([browser, *flags, "--dump-dom", html_path.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    # the DOM the browser built from the page: both runs' lines, the failure table with its rows
    assert dom.count("<polyline class=\"run\"") == 2 and "<svg id=\"verdicts\"" in dom
    failures = dom[dom.index("<table id=\"failures\">"):]
    failures = failures[:failures.index("</table>")]
    assert failures.count("<tr>") == 3 and SPEC.key in failures, "a header and one row per signature"
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", html_path.as_uri()], capture_output=True,
                   timeout=120, check=True)
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1000, 2400)
    # what it drew: the two runs' line colours of the throughput plot are on the page
    pixels = {row[i:i + 3] for row in rows for i in range(0, len(row), 3)}
    for color in RUN_COLORS[:2]:
        rgb = bytes.fromhex(color.lstrip("#"))
        assert rgb in pixels, f"the plot's line in {color} was not drawn"


def test_a_report_that_cannot_be_written_is_refused_before_the_work(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from verimim.diagnostics import UsageError
    from verimim.fuzz import report

    d = tmp_path / "c"
    _campaign(d)
    monkeypatch.setattr(report.os, "access", lambda p, mode: False)  # a read-only file system
    monkeypatch.setattr(report, "summarize", lambda j: pytest.fail("summarised before finding it cannot write"))
    with pytest.raises(UsageError, match="not writable"):
        write_report(d)
    assert not (d / "report.json").exists() and not (d / "report.html").exists()
    monkeypatch.undo()
    write_report(d)  # written whole: no temporary file is left beside it
    assert sorted(p.name for p in d.iterdir() if p.name.startswith((".report", "report"))) == ["report.html",
                                                                                             "report.json"]
    assert os.path.getsize(d / "report.json") > 0


def test_a_report_path_that_is_a_directory_is_named_and_nothing_written(tmp_path: Path) -> None:
    """`report.html` a directory: the campaign was blamed ("the campaign … cannot be used:
    IsADirectoryError"), and report.json had been rewritten before the failure."""
    from verimim.diagnostics import UsageError

    d = tmp_path / "c"
    _campaign(d)
    (d / "report.html").mkdir()
    with pytest.raises(UsageError, match="report.html` is a directory"):
        write_report(d)
    assert not (d / "report.json").exists()


def test_every_verdict_the_kernel_oracle_gives_is_counted(tmp_path: Path) -> None:
    # `reproducer` (check's counterexample command does not report its code) is a verdict the
    # campaign journals; the report listed every verdict with its count but that one, unless
    # a program had it.
    _campaign(tmp_path)
    summary, _, _ = write_report(tmp_path)
    assert summary["verdicts"]["reproducer"] == 0
    j = Journal.open(tmp_path, Settings(seed=1))
    r = j.start_run(10, 1, None, "third")
    j.record(r, _c(5, ("gpu.launch",), Signature("reproducer", "", "kernels")))
    j.end_run(r)
    j.close()
    summary, html_path, _ = write_report(tmp_path)
    assert summary["verdicts"]["reproducer"] == 1 and list(summary["verdicts"]) == list(VERDICTS)


def test_the_comparison_skips_a_run_that_checked_nothing(tmp_path: Path) -> None:
    # A night killed right after it resumed (it only reduced the failures of the one before)
    # was "the previous run": every feature of the next one was newly covered against it.
    _campaign(tmp_path)
    j = Journal.open(tmp_path, Settings(seed=1))
    j.start_run(10, 1, None, "killed at once")  # (never ended, nothing journaled)
    r4 = j.start_run(10, 1, None, "fourth")
    j.record(r4, _c(5, ("gpu.launch", "branch.item")))
    j.end_run(r4)
    j.close()
    summary, _, _ = write_report(tmp_path)
    c = summary["comparison"]
    assert (c["previous"], c["latest"]) == (2, 4) and c["programs"] == [3, 1]
    assert c["newly_covered"] == [] and c["no_longer_covered"] == ["gpu.sync_work_items"]


def test_a_temporary_file_a_killed_report_left_is_removed_by_the_next(tmp_path: Path) -> None:
    # `fuzz report` killed between writing `.report.html.PID.tmp` and renaming it left the file
    # in the campaign directory for good. The next report removes one of a process gone (and old
    # enough); one of a running process stays.
    import os
    import subprocess

    from verimim.fuzz.report import ABANDONED_AFTER_S

    _campaign(tmp_path)
    dead = subprocess.Popen(["true"])  # (a pid whose process has exited)
    dead.wait()
    old = (tmp_path / f".report.html.{dead.pid}.tmp", tmp_path / f".report.json.{dead.pid}.tmp")
    fresh = tmp_path / f".report.json.{os.getpid()}1.tmp"  # (no such running process, but new)
    alive = tmp_path / f".report.html.{os.getppid()}.tmp"
    for f in (*old, fresh, alive):
        f.write_text("<html", encoding="utf-8")
    long_ago = os.stat(old[0]).st_mtime - ABANDONED_AFTER_S - 1
    for f in (*old, alive):
        os.utime(f, (long_ago, long_ago))
    write_report(tmp_path)
    assert not any(f.exists() for f in old)
    assert fresh.exists() and alive.exists()
