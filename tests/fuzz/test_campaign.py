"""`verimim fuzz --campaign DIR` on a Dask LocalCluster of real worker processes: killed with
SIGKILL while running, resumed, nothing journaled is lost and every program is counted once;
`fuzz --json` keeps its keys; `fuzz report` counts the whole journal and compares the runs;
bad directories and schedulers are refused with exit 2."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

VERIMIM = [sys.executable, "-m", "verimim.cli"]


def _journaled(d: Path) -> list[int]:
    try:
        conn = sqlite3.connect(f"file:{d / 'journal.sqlite'}?mode=ro", uri=True)
        try:
            return [r[0] for r in conn.execute("SELECT idx FROM programs ORDER BY idx")]
        finally:
            conn.close()
    except sqlite3.Error:
        return []


def _valid(command: str, obj: dict[str, object]) -> None:
    import jsonschema

    from verimim import schemas

    jsonschema.validate(obj, schemas.SCHEMAS[command])


def _fuzz(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VERIMIM, "fuzz", *args], capture_output=True, text=True, timeout=timeout)


def test_killed_campaign_resumes_and_counts_every_program_once(tmp_path: Path) -> None:
    d = tmp_path / "campaign"
    proc = subprocess.Popen([*VERIMIM, "fuzz", "--campaign", str(d), "--budget", "600", "--workers", "2",
                             "--no-verify", "--seed", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while len(_journaled(d)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    before = _journaled(d)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(before) >= 3, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    after_kill = _journaled(d)
    assert set(before) <= set(after_kill)

    out = _fuzz("--campaign", str(d), "--budget", "8", "--workers", "1", "--no-verify", "--json")
    assert out.returncode in (0, 3), out.stderr[-2000:]
    obj = json.loads(out.stdout)
    for key in ("programs", "per_second", "failures", "coverage", "defects", "seconds", "ok"):
        assert key in obj
    _valid("fuzz", obj)
    final = _journaled(d)
    assert len(final) == len(set(final)) == obj["journal_programs"]
    assert set(after_kill) <= set(final), "nothing journaled before the kill is lost"
    assert obj["programs"] == len(final) - len(after_kill), "--json counts this run's programs"
    gaps = set(range(max(after_kill) + 1)) - set(after_kill)
    if obj["programs"] >= len(gaps):
        assert gaps <= set(final), "programs in flight at the kill are checked on resume"
    assert obj["ok"] == (out.returncode == 0) and obj["campaign"] == str(d) and obj["run"] == 2

    rep = subprocess.run([*VERIMIM, "fuzz", "report", str(d), "--json"], capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr[-2000:]
    summary = json.loads(rep.stdout)
    _valid("fuzz-report", summary)
    assert summary["programs"] == len(final)
    assert [r["programs"] for r in summary["runs"]] == [len(after_kill), obj["programs"]]
    assert summary["runs"][0]["complete"] is False and summary["runs"][1]["complete"] is True
    assert summary["comparison"]["programs"] == [len(after_kill), obj["programs"]]
    assert sum(summary["verdicts"].values()) == len(final)
    ops = summary["coverage"]["operations"]
    assert "gpu.launch" in ops and "gpu.sync_work_items" in ops and ops["gpu.launch"] > 0
    assert json.loads((d / "report.json").read_text())["programs"] == len(final)
    # the format given to the `fuzz` group is the report's (report's own default undid it: no stdout)
    for before in (["--json"], ["--format", "json"]):
        again = subprocess.run([*VERIMIM, "fuzz", *before, "report", str(d)], capture_output=True, text=True,
                               timeout=120)
        assert json.loads(again.stdout)["programs"] == len(final), (before, again.stdout[:200])
    page = (d / "report.html").read_text()
    assert "<svg id='throughput'" in page and "<polyline class='run'" in page and "<table id='coverage'>" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", ""), "self-contained"


def test_campaign_directory_that_is_not_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("do not touch")
    out = _fuzz("--campaign", str(tmp_path), "--budget", "1", "--json", timeout=60)
    assert out.returncode == 2
    obj = json.loads(out.stdout)
    assert obj["ok"] is False and obj["diagnostics"][0]["code"] == "E-USAGE"
    assert str(tmp_path) in obj["diagnostics"][0]["message"]
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    rep = subprocess.run([*VERIMIM, "fuzz", "report", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert rep.returncode == 2 and "not a fuzzing campaign" in rep.stderr


def test_scheduler_that_does_not_answer_is_refused(tmp_path: Path) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    out = _fuzz("--campaign", str(tmp_path / "c"), "--scheduler", f"tcp://127.0.0.1:{port}", "--budget", "1",
                "--json", timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"tcp://127.0.0.1:{port}" in json.loads(out.stdout)["diagnostics"][0]["message"]
    assert not (tmp_path / "c").exists(), "nothing is written for a campaign that could not start"


@pytest.mark.parametrize("address", ["garbage", "http://127.0.0.1:8786", "tcp://127.0.0.1", "tcp://:8786",
                                     "tcp://127.0.0.1:99999"])
def test_a_scheduler_address_that_is_none_is_named_at_once(address: str) -> None:
    """A malformed address was "answered, but not as a Dask scheduler" (nothing answered), some
    after the 10 s connection time-out."""
    from verimim.diagnostics import UsageError
    from verimim.fuzz.cluster import _check_address

    with pytest.raises(UsageError, match="is not a Dask scheduler address"):
        _check_address(address)


def test_a_refused_port_is_said_without_waiting_for_the_connect_time_out() -> None:
    import socket

    from verimim.diagnostics import UsageError
    from verimim.fuzz.cluster import _check_address

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    start = time.monotonic()
    with pytest.raises(UsageError, match="refuses connections"):
        _check_address(f"tcp://127.0.0.1:{port}")
    assert time.monotonic() - start < 5
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    try:  # one that accepts connections is left to Dask's handshake
        _check_address(f"tcp://127.0.0.1:{listening.getsockname()[1]}")
        _check_address(f"127.0.0.1:{listening.getsockname()[1]}")
    finally:
        listening.close()


def test_a_scheduler_without_workers_is_refused(tmp_path: Path, dask_scheduler: str) -> None:
    # it checked nothing for its whole budget and ended green
    out = _fuzz("--campaign", str(tmp_path / "c"), "--scheduler", dask_scheduler, "--budget", "2", "--json",
                timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "has no worker" in json.loads(out.stdout)["diagnostics"][0]["message"]
    assert not (tmp_path / "c").exists()


def test_programs_alone_has_no_time_limit(tmp_path: Path) -> None:
    # a default budget cut seeded `--programs N` runs short at a machine-dependent point
    d = tmp_path / "c"
    out = _fuzz("--campaign", str(d), "--programs", "2", "--workers", "1", "--no-verify", "--json")
    assert out.returncode in (0, 3), out.stderr[-2000:]
    rep = json.loads(_fuzz("report", str(d), "--json").stdout)
    _valid("fuzz-report", rep)
    assert rep["runs"][0]["budget"] is None and rep["programs"] == 2


def test_a_web_server_at_the_scheduler_address_is_named_as_such() -> None:
    # Dask read the HTTP reply as a message header: "does not answer: Unable to allocate 3.01 EiB"
    import socket
    import threading

    from distributed import Client

    from verimim.diagnostics import UsageError
    from verimim.fuzz import cluster

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def answer_http() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()

    threading.Thread(target=answer_http, daemon=True).start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(UsageError) as e:
            cluster._join(Client, address)
    finally:
        listener.close()
    assert "EiB" not in e.value.message and address in e.value.message, e.value.message


def test_a_listener_that_is_not_a_dask_scheduler_is_refused_in_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dask's own timeout covers the connection, not the handshake: a port where a web server
    listened kept the campaign waiting for minutes. (A client type that never answers here.)"""
    from verimim.diagnostics import UsageError
    from verimim.fuzz import cluster

    monkeypatch.setattr(cluster, "JOIN_TIMEOUT_S", 0.2)
    t0 = time.monotonic()
    with pytest.raises(UsageError, match=r"tcp://10\.0\.0\.1:8786 does not answer: no Dask handshake"):
        cluster._join(lambda address, timeout: time.sleep(60), "tcp://10.0.0.1:8786")
    assert time.monotonic() - t0 < 10


def test_a_preload_that_is_neither_a_module_nor_a_file_is_a_usage_error(tmp_path: Path) -> None:
    for bad in ("no_such_module_for_verimim", str(tmp_path / "missing.py")):
        out = _fuzz("--campaign", str(tmp_path / "c"), "--workers", "1", "--preload", bad, "--budget", "1", "--json",
                    timeout=60)
        assert out.returncode == 2, out.stderr[-2000:]
        assert "--preload" in json.loads(out.stdout)["diagnostics"][0]["message"]
        assert not (tmp_path / "c").exists()


def test_a_preload_that_raises_is_a_usage_error_without_dask_tracebacks(tmp_path: Path) -> None:
    """Its worker never starts: that was E-INTERNAL (exit 3) with two Dask tracebacks."""
    bad = tmp_path / "raises.py"
    bad.write_text("raise RuntimeError('preload fails')\n", encoding="utf-8")
    out = _fuzz("--campaign", str(tmp_path / "c"), "--workers", "1", "--preload", str(bad), "--budget", "1", "--json",
                timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "a preload module must import without error" in json.loads(out.stdout)["diagnostics"][0]["message"]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]


def test_errors_of_the_campaign_commands_are_one_line_with_their_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    """CLI.md: no traceback; the environment (a directory that cannot be written) is exit 2,
    a bug of ours exit 3, with one JSON object under --json."""
    from verimim import cli

    def fails(e: BaseException) -> Callable[[], int]:
        def body() -> int:
            raise e
        return body

    with pytest.raises(SystemExit) as env:
        cli._campaign_guarded(fails(PermissionError(13, "Permission denied", "c/report.json")), "c", True, False,
                              "fuzz-report")
    assert env.value.code == 2
    obj = json.loads(capsys.readouterr().out)
    assert obj["diagnostics"][0]["code"] == "E-USAGE" and "c/report.json" in obj["diagnostics"][0]["message"]
    assert cli._campaign_guarded(fails(RuntimeError("a bug")), "c", True, False, "fuzz") == 3
    out = capsys.readouterr()
    obj = json.loads(out.out)
    assert obj["ok"] is False and obj["diagnostics"][0]["code"] == "E-INTERNAL" and "Traceback" not in out.err
    _valid("fuzz", obj)


def test_ok_is_the_truth_of_exit_code_0_when_only_known_failures_recur() -> None:
    from verimim.fuzz.campaign import RunSummary

    known = [{"kind": "spec", "new": False, "count": 2}]
    summary = RunSummary("c", 2, 5, 1.0, known, {}, {}, {"spec": 2}, 10, new_failures=0, cluster="LocalCluster")
    assert summary.to_json()["ok"] is True and summary.to_json()["oracle"] == "pipeline"
    assert RunSummary("c", 2, 5, 1.0, known, {}, {}, {}, 10, 1, "x").to_json()["ok"] is False


@pytest.mark.parametrize("args", [["--workers", "2"], ["--scheduler", "tcp://127.0.0.1:1"],
                                  ["--program-timeout", "10"], ["--reduce-budget", "5"]])
def test_cluster_options_need_a_campaign(args: list[str]) -> None:
    out = _fuzz(*args, "--budget", "1", "--json", timeout=60)
    assert out.returncode == 2 and "--campaign" in json.loads(out.stdout)["diagnostics"][0]["message"]


def test_out_is_no_campaign_option(tmp_path: Path) -> None:
    out = _fuzz("--campaign", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--budget", "1", "--json", timeout=60)
    assert out.returncode == 2 and "DIR/failures" in json.loads(out.stdout)["diagnostics"][0]["message"]
    assert not (tmp_path / "c").exists()


def test_a_program_drawn_again_is_journaled_as_a_duplicate_and_not_checked(tmp_path: Path) -> None:
    d = tmp_path / "c"
    preload = str(Path(__file__).resolve().parent / "preload" / "few_programs.py")
    out = _fuzz("--campaign", str(d), "--programs", "9", "--workers", "1", "--seed", "1", "--no-verify",
                "--preload", preload, "--json")
    assert out.returncode in (0, 3), out.stderr[-2000:]
    obj = json.loads(out.stdout)
    _valid("fuzz", obj)
    assert obj["programs"] == 3 and obj["duplicates"] == 6 and obj["journal_programs"] == 3, obj
    conn = sqlite3.connect(f"file:{d / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        progs = dict(conn.execute("SELECT idx, fingerprint FROM programs"))
        dups = list(conn.execute("SELECT idx, of_idx, fingerprint FROM duplicates ORDER BY idx"))
    finally:
        conn.close()
    assert sorted(progs) == [0, 1, 2] and len(set(progs.values())) == 3
    assert [(i, of) for i, of, _ in dups] == [(i, i % 3) for i in range(3, 9)]
    assert all(progs[of] == fp for _, of, fp in dups), "a duplicate has its first program's fingerprint"
    # resumed, the journal's fingerprints count: the next indices repeat programs of the first run
    more = _fuzz("--campaign", str(d), "--programs", "3", "--workers", "1", "--no-verify", "--preload", preload,
                 "--json")
    again = json.loads(more.stdout)
    assert again["programs"] == 0 and again["duplicates"] == 3 and again["journal_programs"] == 3, again
    rep = json.loads(_fuzz("report", str(d), "--json").stdout)
    _valid("fuzz-report", rep)
    assert rep["programs"] == 3 and rep["duplicates"] == 9
    assert [r["duplicates"] for r in rep["runs"]] == [6, 3]


def test_resuming_with_other_settings_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from verimim.fuzz.campaign import conflicting_options
    from verimim.fuzz.task import Settings

    kept = Settings(seed=3, verify=True)
    err = ", ".join(conflicting_options(kept, 99, False, False))
    assert "--seed 99 (it keeps seed 3)" in err and "--no-verify (it verifies)" in err
    assert conflicting_options(kept, 3, True, False) == []
    d = tmp_path / "c"
    preload = str(Path(__file__).resolve().parent / "preload" / "few_programs.py")
    first = _fuzz("--campaign", str(d), "--programs", "1", "--workers", "1", "--no-verify", "--seed", "3",
                  "--preload", preload)
    assert first.returncode == 0, first.stderr
    before = (d / "journal.sqlite").read_bytes()
    out = _fuzz("--campaign", str(d), "--programs", "1", "--workers", "1", "--no-verify", "--seed", "99",
                "--preload", preload, "--json")
    assert out.returncode == 2 and "--seed 99 (it keeps seed 3)" in out.stderr, out.stderr
    assert json.loads(out.stdout)["diagnostics"][0]["code"] == "E-USAGE"
    assert (d / "journal.sqlite").read_bytes() == before


def test_a_campaign_in_use_is_refused(tmp_path: Path) -> None:
    from verimim.diagnostics import UsageError
    from verimim.fuzz.journal import Journal
    from verimim.fuzz.task import Settings

    d = tmp_path / "c"
    Journal.open(d, Settings(seed=1)).close()
    held = Journal.lock(d)
    try:
        with pytest.raises(UsageError, match="being run by another verimim process"):
            Journal.lock(d)
    finally:
        os.close(held)
    os.close(Journal.lock(d))  # free again once the first holder is done




def test_a_campaign_run_reports_its_kernel_verdicts_as_the_plain_run_does(tmp_path: Path) -> None:
    """`fuzz --json` keeps its keys in a campaign: `kernels` counts this run's kernel verdicts,
    the same programs (one seed) giving the same counts as the plain run."""
    plain = _fuzz("--programs", "6", "--seed", "3", "--json")
    camp = _fuzz("--campaign", str(tmp_path / "c"), "--programs", "6", "--seed", "3", "--workers", "1", "--json")
    assert plain.returncode == 0 and camp.returncode == 0, (plain.stderr[-2000:], camp.stderr[-2000:])
    p, c = json.loads(plain.stdout), json.loads(camp.stdout)
    _valid("fuzz", c)
    assert p["programs"] == c["programs"] == 6
    assert c["kernels"] == p["kernels"] and c["kernels"]["kernels"] > 0, (c["kernels"], p["kernels"])
    assert sum(c["kernels"]["verdicts"].values()) == 2 * c["kernels"]["kernels"]
    # resumed, the counts are the new run's, not the journal's
    again = json.loads(_fuzz("--campaign", str(tmp_path / "c"), "--programs", "1", "--workers", "1", "--json").stdout)
    assert again["programs"] == 1 and again["journal_programs"] == 7 and again["kernels"]["programs"] <= 1, again


def test_ctrl_c_at_a_terminal_prints_no_worker_traceback(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole process group, the workers too: each printed a
    traceback of its own KeyboardInterrupt on the user's terminal."""
    d = tmp_path / "c"
    proc = subprocess.Popen([*VERIMIM, "fuzz", "--campaign", str(d), "--budget", "600", "--workers", "2",
                             "--no-verify", "--seed", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,  # (its own group, as a terminal's foreground job)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while len(_journaled(d)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_the_run_and_still_prints_its_summary(tmp_path: Path, sig: int) -> None:
    """SIGINT (Ctrl-C) stops a campaign where it is: the run is ended in the journal, --json
    still prints one summary object (it counts what the journal kept of this run), the exit
    code is 130, and the campaign resumes. SIGTERM (`timeout`, systemd's stop) does the same:
    it ended the process with no summary and the run never ended in the journal."""
    d = tmp_path / "c"
    proc = subprocess.Popen([*VERIMIM, "fuzz", "--campaign", str(d), "--budget", "600", "--workers", "1",
                             "--no-verify", "--seed", "5", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,  # (a shell's background job ignores SIGINT, and a child inherits that)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while len(_journaled(d)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    obj = json.loads(out)
    _valid("fuzz", obj)
    kept = _journaled(d)
    assert obj["programs"] == obj["journal_programs"] == len(kept) >= 3, obj
    assert obj["ok"] is False and obj["interrupted"] is True, obj  # (`ok` is exit code 0's truth)
    assert "interrupted" in err and "Traceback" not in err, err[-2000:]
    rep = json.loads(_fuzz("report", str(d), "--json").stdout)
    assert [(r["programs"], r["ended"] is not None) for r in rep["runs"]] == [(len(kept), True)], rep["runs"]
    more = _fuzz("--campaign", str(d), "--programs", "2", "--workers", "1", "--json")
    assert more.returncode == 0 and json.loads(more.stdout)["journal_programs"] == len(kept) + 2, more.stderr[-2000:]


def test_sigterm_ends_a_plain_fuzz_run_as_ctrl_c_does() -> None:
    # it was killed by the signal (exit 143, no "interrupted")
    proc = subprocess.Popen([*VERIMIM, "fuzz", "--budget", "300", "--no-verify", "--seed", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, (proc.returncode, err[-2000:])
