"""Campaign failures end to end, on real Dask worker processes patched by a `--preload` module:
a deliberately broken phase is found, kept once under one signature and reduced to at most a
third of its size (the reduced program still fails the same way); a program that kills its
worker is journaled as `crash`, one that never finishes as `hang`, and the campaign goes on."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

PRELOAD = Path(__file__).resolve().parent / "preload"
VERIMIM = [sys.executable, "-m", "verimim.cli"]


def _fuzz(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VERIMIM, "fuzz", *args], capture_output=True, text=True, timeout=timeout)


def _rows(d: Path, query: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{d / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return list(conn.execute(query))
    finally:
        conn.close()


def test_broken_phase_is_found_once_and_reduced(tmp_path: Path) -> None:
    d = tmp_path / "c"
    preload = PRELOAD / "broken_phase.py"
    out = _fuzz("--campaign", str(d), "--budget", "5", "--workers", "2", "--seed", "3", "--no-verify", "--preload",
                str(preload), "--reduce-budget", "150", "--json")
    assert out.returncode == 3, out.stderr[-3000:]
    obj = json.loads(out.stdout)
    broken = [f for f in obj["failures"] if f["signature"]["phase"] == "gpu.remove_double_syncs"]
    assert len(broken) == 1, obj["failures"]
    (f,) = broken
    assert f["kind"] == "internal" and f["new"] and f["signature"]["code"] == "E-INTERNAL"
    failing = _rows(d, "SELECT count(*), count(DISTINCT signature) FROM programs WHERE message LIKE "
                       "'%remove_double_syncs broke%'")
    assert failing[0][0] == f["count"] >= 1 and failing[0][1] == 1, "one signature for every program it broke"
    dirs = [p for p in (d / "failures").iterdir() if "remove_double_syncs" in p.name]
    assert len(dirs) == 1
    fd = dirs[0]
    assert {"original.mim", "reduced.mim", "reproduce.sh", "failure.json"} <= {p.name for p in fd.iterdir()}
    ((before, after, status),) = _rows(d, f"SELECT size_before, size_after, reduce_status FROM failures "
                                          f"WHERE signature = '{fd.name}'")
    assert status in ("fixpoint", "budget") and after * 3 <= before, (before, after, status)
    reduced = fd / "reduced.mim"
    assert "core.wrap.mul" in reduced.read_text()
    # the reduced program fails the same way under the same broken phase (and passes without it)
    check = [sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1]); from verimim.cli import main; "
             "main(['check', '--json', sys.argv[2]])", str(preload), str(reduced)]
    again = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert again.returncode == 3 and "remove_double_syncs broke" in again.stdout
    clean = subprocess.run([*VERIMIM, "check", "--json", str(reduced)], capture_output=True, text=True, timeout=120)
    assert "remove_double_syncs broke" not in clean.stdout

    # Resumed, the same broken phase fails the same way: a known failure, which exits 0 (a nightly
    # job fails on new signatures only).
    more = _fuzz("--campaign", str(d), "--budget", "3", "--workers", "1", "--no-verify", "--preload", str(preload),
                 "--reduce-budget", "0", "--json")
    obj2 = json.loads(more.stdout)
    assert more.returncode == (3 if obj2["new_failures"] else 0), more.stderr[-3000:]
    again_broken = [x for x in obj2["failures"] if x["signature"]["phase"] == "gpu.remove_double_syncs"]
    assert all(not x["new"] for x in again_broken)

    rep = _fuzz("report", str(d), "--json", timeout=120)
    row = next(r for r in json.loads(rep.stdout)["failures"] if r["signature"] == fd.name)
    assert row["size_after"] == after and row["reduced"] == str(reduced) and "verimim check" in row["command"]
    assert fd.name in (d / "report.html").read_text()

    # A reduction killed before the journal took its result, resumed once the phase is fixed (no
    # preload): the failure no longer shows, and the reduced program that fails stays as it was.
    kept = reduced.read_bytes()
    conn = sqlite3.connect(d / "journal.sqlite")
    conn.execute("UPDATE failures SET reduce_status = NULL WHERE signature = ?", (fd.name,))
    conn.commit()
    conn.close()
    fixed = _fuzz("--campaign", str(d), "--programs", "1", "--workers", "1", "--no-verify", "--reduce-budget",
                  "20", "--json")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert _rows(d, f"SELECT reduce_status FROM failures WHERE signature = '{fd.name}'") == [("not reproducible",)]
    assert reduced.read_bytes() == kept
    assert (fd / "reproduce.sh").read_text().count("# the reduced program") == 1


def test_a_missed_defect_is_reduced_to_a_program_that_still_has_it(tmp_path: Path) -> None:
    """The workers' interpreter overlooks a second free (a preload): double_free programs are
    missed defects. The reduced program must still free a block twice, which the unpatched
    interpreter reports; a text reduction that only kept the signature cut the frees out."""
    d = tmp_path / "c"
    # (a count, not a time budget: on a loaded machine 20 s held 13 programs, none a double free;
    # seed 1's is program 5 of its first block of 36: fuzz.task.defect_position)
    out = _fuzz("--campaign", str(d), "--programs", "8", "--workers", "1", "--seed", "1", "--no-verify",
                "--preload", str(PRELOAD / "lenient_free.py"), "--reduce-budget", "60", "--json")
    assert out.returncode == 3, out.stderr[-3000:]
    missed = [f for f in json.loads(out.stdout)["failures"] if f["signature"]["code"] == "E-DOUBLE-FREE"]
    assert len(missed) == 1 and missed[0]["signature"]["kind"] == "missed-defect", missed
    (fd,) = [p for p in (d / "failures").iterdir() if "E-DOUBLE-FREE" in p.name]
    ((before, after, status),) = _rows(d, f"SELECT size_before, size_after, reduce_status FROM failures "
                                          f"WHERE signature = '{fd.name}'")
    assert status in ("fixpoint", "budget") and after < before, (before, after, status)
    run = subprocess.run([*VERIMIM, "run", "--json", str(fd / "reduced.mim")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1 and "E-DOUBLE-FREE" in run.stdout, run.stdout[-2000:]


def test_crash_and_hang_are_journaled_and_the_campaign_goes_on(tmp_path: Path) -> None:
    d = tmp_path / "c"
    out = _fuzz("--campaign", str(d), "--budget", "40", "--workers", "2", "--seed", "4", "--no-verify",
                "--preload", str(PRELOAD / "hang_crash.py"), "--program-timeout", "60", "--json")
    assert out.returncode == 3, out.stderr[-3000:]
    verdicts = dict(_rows(d, "SELECT idx, verdict FROM programs"))
    assert verdicts.get(0) == "crash" and verdicts.get(1) == "hang", verdicts
    ((crash_message,),) = _rows(d, "SELECT message FROM programs WHERE idx = 0")
    assert "exited with status 13" in crash_message, "the nanny's note on the dead worker leads the record"
    assert any(v not in ("crash", "hang") for i, v in verdicts.items() if i > 1), "the campaign went on"
    kinds = {f["kind"]: f for f in json.loads(out.stdout)["failures"]}
    for kind in ("crash", "hang"):
        fd = Path(kinds[kind]["file"]).parent
        assert (fd / "original.mim").read_text().count("plugin gpu;") == 1
        assert "verimim check original.mim" in (fd / "reproduce.sh").read_text()
    ((status,),) = _rows(d, "SELECT reduce_status FROM failures WHERE kind = 'hang'")
    assert status == "not reduced (hang)"


def test_a_hang_soon_after_a_crash_on_one_worker_does_not_stall_the_campaign(tmp_path: Path) -> None:
    # The crash's removal of the worker started Dask's lost-worker timer (15 s); it fired while
    # the hang's restart had the worker down, and the cluster closed the nanny: no worker ever
    # again, and a `--programs` run waited with nothing to run on.
    d = tmp_path / "c"
    out = _fuzz("--campaign", str(d), "--programs", "4", "--workers", "1", "--seed", "4", "--no-verify",
                "--preload", str(PRELOAD / "hang_crash.py"), "--program-timeout", "10", "--json", timeout=200)
    assert out.returncode == 3, out.stderr[-3000:]
    verdicts = dict(_rows(d, "SELECT idx, verdict FROM programs"))
    assert verdicts.get(0) == "crash" and verdicts.get(1) == "hang" and len(verdicts) == 4, verdicts


def test_a_hang_holding_the_interpreter_lock_is_charged_to_its_program_only(tmp_path: Path) -> None:
    # The hung program's worker is restarted; the next program was given to it meanwhile and
    # the restart killed it: a `crash` of a program that never crashes, and a second failure.
    d = tmp_path / "c"
    out = _fuzz("--campaign", str(d), "--programs", "5", "--workers", "1", "--seed", "4", "--no-verify",
                "--preload", str(PRELOAD / "gil_hang.py"), "--program-timeout", "8", "--json")
    assert out.returncode == 3, out.stderr[-3000:]
    verdicts = dict(_rows(d, "SELECT idx, verdict FROM programs"))
    assert verdicts.get(1) == "hang" and len(verdicts) == 5, verdicts
    assert "crash" not in verdicts.values(), verdicts
    assert [f["kind"] for f in json.loads(out.stdout)["failures"]] == ["hang"]


def test_a_deleted_failure_directory_is_written_again_on_resume(tmp_path: Path) -> None:
    # the report showed the failure with no message and a broken command, and a resume pointed at
    # files that were not there
    import shutil

    d = tmp_path / "c"
    preload = str(PRELOAD / "broken_phase.py")
    args = ["--workers", "1", "--no-verify", "--preload", preload, "--reduce-budget", "0", "--json"]
    first = _fuzz("--campaign", str(d), "--budget", "5", "--seed", "3", *args)
    assert first.returncode == 3, first.stderr[-3000:]
    shutil.rmtree(d / "failures")
    rep = _fuzz("report", str(d), "--json", timeout=120)
    assert all("is missing" in f["message"] for f in json.loads(rep.stdout)["failures"])
    more = _fuzz("--campaign", str(d), "--programs", "1", *args)
    assert more.returncode in (0, 3), more.stderr[-3000:]
    keys = [k for (k,) in _rows(d, "SELECT signature FROM failures")]
    assert keys
    for key in keys:
        fd = d / "failures" / key
        assert (fd / "original.mim").exists() and (fd / "reproduce.sh").exists(), key
        assert json.loads((fd / "failure.json").read_text())["message"]


def test_a_crash_on_a_joined_cluster_is_journaled_and_the_campaign_ends(tmp_path: Path, dask_scheduler: str) -> None:
    # A joined scheduler retries a task whose worker died (its own allowed-failures), and a poll a
    # second apart never saw the program running: it was placed again under a new key forever,
    # nothing journaled, and a campaign of --programs 3 never ended (with a budget: exit 0).
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", dask_scheduler, "--nthreads", "1",
                               "--no-dashboard", "--preload", str(PRELOAD / "crash_first.py")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = tmp_path / "c"
    try:
        out = _fuzz("--campaign", str(d), "--scheduler", dask_scheduler, "--programs", "3", "--seed", "4",
                    "--no-verify", "--reduce-budget", "0", "--program-timeout", "60", "--json", timeout=300)
    finally:
        worker.terminate()
        worker.wait(30)
    obj = json.loads(out.stdout)
    assert out.returncode == 3 and obj["programs"] == 3, (out.returncode, out.stderr[-2000:])
    rows = dict(_rows(d, "SELECT idx, verdict FROM programs"))
    assert rows[0] == "crash" and len(rows) == 3, rows
    assert [f["kind"] for f in obj["failures"]] == ["crash"]
