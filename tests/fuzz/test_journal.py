"""The campaign journal (verimim.fuzz.journal): created in an empty directory, reopened with its
settings, programs journaled once, gaps first on resume; directories and files that are not
campaigns are refused without being written."""
from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from verimim.diagnostics import UsageError
from verimim.fuzz.journal import JOURNAL, Journal
from verimim.fuzz.signature import Signature
from verimim.fuzz.task import Checked, Settings, choices_from_json, choices_json


def _row(index: int, sig: Signature | None = None) -> Checked:
    return Checked(index, 1000 + index, (1, True, 3), defect=None, features=("gpu.launch",), ops=3, kernels=1,
                   launches=1, size=100, verdict=sig.kind if sig else "ok", signature=sig, text="plugin core;\n")


def test_new_campaign_and_reopen(tmp_path: Path) -> None:
    d = tmp_path / "c"
    j = Journal.open(d, Settings(seed=7, verify=False))
    run = j.start_run(10.0, 2, None, "test")
    assert j.record(run, _row(0)) and j.record(run, _row(2))
    assert not j.record(run, _row(2)), "an index is journaled once"
    j.close()
    j = Journal.open(d, Settings(seed=99))  # an existing campaign keeps its own settings
    assert j.settings.seed == 7 and not j.settings.verify
    assert j.count() == 2 and j.count(run) == 2
    todo = j.todo()
    assert [next(todo) for _ in range(3)] == [1, 3, 4], "the gap left by a killed run comes first"
    j.close()


def test_failure_is_recorded_with_its_program(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=1))
    run = j.start_run(1.0, 1, None, "")
    sig = Signature("internal", "E-INTERNAL", "gpu.split_apply", "KeyError@verimim.phases.split:f")
    assert j.record(run, _row(0, sig), failure_dir=str(tmp_path / "failures" / sig.key))
    assert j.record(run, _row(1, sig))
    assert j.known(sig.key)
    (f,) = j.failures()
    assert f.signature == sig and f.count == 2 and f.first_idx == 0 and f.reduce_status is None
    j.reduced(sig.key, 40, 3, 1.5, "fixpoint")
    (f,) = j.failures()
    assert (f.size_after, f.lines_after, f.reduce_status) == (40, 3, "fixpoint")


def test_choices_round_trip() -> None:
    cs = (0, 3, True, False, 2.5, b"\x00\xff", "s")
    assert choices_from_json(choices_json(cs)) == cs
    assert [type(c) for c in choices_from_json(choices_json(cs))] == [type(c) for c in cs]


def test_signature_keys_are_distinct_and_stable() -> None:
    a = Signature("spec", "E-SPEC", "gpu.remove_double_syncs")
    b = Signature("spec", "E-SPEC", "gpu.split_apply")
    assert a.key != b.key and a.key == Signature("spec", "E-SPEC", "gpu.remove_double_syncs").key
    assert "/" not in Signature("internal", "E-INTERNAL", "x", "KeyError@a/b:c").key


def test_non_empty_directory_is_not_a_campaign(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a fuzzing campaign"):
        Journal.open(tmp_path, Settings(seed=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b""])
def test_corrupt_journal_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / JOURNAL
    path.write_bytes(content)
    if not content:  # an empty file is an empty SQLite database: foreign, no meta table
        with pytest.raises(UsageError):
            Journal.open(tmp_path, Settings(seed=1))
    else:
        with pytest.raises(UsageError, match="not a verimim fuzzing journal"):
            Journal.open(tmp_path, Settings(seed=1))
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == [JOURNAL]


def _refused_untouched(d: Path, script: str, match: str) -> None:
    """A database made by `script` as DIR/journal.sqlite is refused (`match`), and the
    directory holds exactly what it held: the file, unchanged, and no -wal or -shm beside it."""
    path = d / JOURNAL
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(UsageError, match=match):
        Journal.open(d, Settings(seed=1))
    assert path.read_bytes() == before
    assert sorted(p.name for p in d.iterdir()) == [JOURNAL]


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    _refused_untouched(tmp_path, "CREATE TABLE meta (key TEXT, value TEXT); "
                       "INSERT INTO meta VALUES ('format', 'someone-else');", "not a verimim fuzzing journal")


def test_report_needs_an_existing_campaign(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a fuzzing campaign"):
        Journal.open(tmp_path / "nothing-here")
    assert not (tmp_path / "nothing-here").exists()


def test_duplicates_are_journaled_apart_and_fill_no_gap(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=1))
    run = j.start_run(1.0, 1, None, "")
    assert j.record(run, replace(_row(0), fingerprint="f0")) and j.record(run, replace(_row(1), fingerprint="f1"))
    assert j.record_duplicate(run, 2, 0, "f0") and not j.record_duplicate(run, 2, 0, "f0")
    assert j.fingerprints() == {"f0": 0, "f1": 1}
    assert j.count() == 2 and j.duplicates() == 1 and j.duplicates(run) == 1, "programs are the distinct ones"
    todo = j.todo()
    assert next(todo) == 3, "a duplicate's index is journaled: no gap to check again"


def test_version_1_journal_is_upgraded_on_opening_not_by_probe(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=5))
    j.record(j.start_run(1.0, 1, None, ""), _row(0))
    # make it what version 1 wrote: no fingerprint column, no duplicates table
    j.conn.executescript("BEGIN; DROP INDEX programs_fp; DROP TABLE duplicates; ALTER TABLE programs DROP COLUMN "
                         "fingerprint; UPDATE meta SET value = '1' WHERE key = 'version'; COMMIT;")
    j.close()
    before = (tmp_path / JOURNAL).read_bytes()
    assert Journal.probe(tmp_path)
    assert (tmp_path / JOURNAL).read_bytes() == before, "probing a campaign writes nothing"
    j = Journal.open(tmp_path)
    assert j.meta("version") == "2" and j.count() == 1 and j.duplicates() == 0
    assert j.record(j.start_run(1.0, 1, None, ""), replace(_row(1), fingerprint="f"))
    assert j.fingerprints() == {"f": 1}
    j.close()


def _campaign_with_rows(d: Path, rows: int) -> Path:
    """A campaign of `rows` programs, each with a long message: the journal spans many pages."""
    j = Journal.open(d, Settings(seed=3))
    run = j.start_run(1.0, 1, None, "")
    for i in range(rows):
        j.record(run, replace(_row(i), message="m" * 2000, fingerprint=f"f{i}"))
    j.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    j.close()
    return d / JOURNAL


def test_a_journal_damaged_past_its_first_pages_is_refused_untouched(tmp_path: Path) -> None:
    """Its `meta` and table list read well; a query reaching the damage would fail mid-campaign
    (or the campaign would write into it): SQLite's page check refuses it before anything."""
    path = _campaign_with_rows(tmp_path / "c", 60)
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 20 * page
    data[12 * page:14 * page] = bytes(range(256)) * (2 * page // 256)
    path.write_bytes(bytes(data))
    for opening in (lambda: Journal.open(path.parent), lambda: Journal.open(path.parent, read_only=True),
                    lambda: Journal.probe(path.parent)):
        with pytest.raises(UsageError, match="damaged"):
            opening()
    assert path.read_bytes() == bytes(data)
    assert sorted(p.name for p in path.parent.iterdir()) == [JOURNAL], "no -wal or -shm made beside it"


def test_a_database_claiming_our_format_without_our_columns_is_refused(tmp_path: Path) -> None:
    _refused_untouched(tmp_path, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES "
                       "('format', 'verimim-fuzz-journal'), ('version', '2'); CREATE TABLE runs (x); "
                       "CREATE TABLE programs (y); CREATE TABLE failures (z);", "lacks the columns runs.budget")


def test_refusing_a_foreign_wal_database_makes_no_side_files(tmp_path: Path) -> None:
    _refused_untouched(tmp_path, "PRAGMA journal_mode=WAL; CREATE TABLE t (x);", "not a verimim fuzzing journal")


def test_the_report_reads_a_version_1_journal_as_it_is(tmp_path: Path) -> None:
    j = Journal.open(tmp_path, Settings(seed=5))
    j.record(j.start_run(1.0, 1, None, ""), _row(0))
    j.conn.executescript("BEGIN; DROP INDEX programs_fp; DROP TABLE duplicates; ALTER TABLE programs DROP COLUMN "
                         "fingerprint; UPDATE meta SET value = '1' WHERE key = 'version'; COMMIT;")
    j.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    j.close()
    before = (tmp_path / JOURNAL).read_bytes()
    j = Journal.open(tmp_path, read_only=True)
    assert j.meta("version") == "1" and j.count() == 1 and j.duplicates() == 0 and j.fingerprints() == {}
    j.close()
    assert (tmp_path / JOURNAL).read_bytes() == before


def test_a_read_only_journal_is_named_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Root writes anyway: the permission is asked of os.access, patched here.)"""
    import os

    _campaign_with_rows(tmp_path, 1)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p).name == JOURNAL else real(p, mode))
    with pytest.raises(UsageError, match=r"cannot write the campaign journal .*read-only"):
        Journal.open(tmp_path)
    monkeypatch.setattr(os, "access", lambda p, mode: False)
    with pytest.raises(UsageError, match="cannot write the campaign directory"):
        Journal.open(tmp_path / "new", Settings(seed=1))


def test_failure_folders_are_found_from_any_working_directory(tmp_path: Path) -> None:
    j = Journal.open(tmp_path / "camp", Settings(seed=1))
    key = "internal_x"
    assert j.failure_dir(f"failures/{key}") == tmp_path / "camp" / "failures" / key
    assert j.failure_dir(f"camp/failures/{key}") == tmp_path / "camp" / "failures" / key, "older journals"
    j.close()


def _journal_edited(d: Path, edit: str) -> Path:
    """A campaign journal of one program, then edited by hand with the SQL `edit`."""
    j = Journal.open(d, Settings(seed=1))
    j.record(j.start_run(1.0, 1, None, ""), _row(0))
    j.close()
    conn = sqlite3.connect(d / JOURNAL)
    conn.execute(edit)
    conn.commit()
    conn.close()
    return d


@pytest.mark.parametrize("edit, what", [
    ("UPDATE programs SET features = 'not json'", "programs.features of row 0"),
    ("UPDATE programs SET phases = '{\"a\": 1}'", "programs.phases of row 0"),
    ("UPDATE programs SET choices = 'garbage'", "programs.choices of row 0"),
    ("UPDATE runs SET started = 'x'", "runs.started of row 1"),
    # JSON of the wrong shape: the report stopped with E-INTERNAL (unhashable list, unpacking)
    ("UPDATE programs SET features = '[[1]]'", "programs.features of row 0"),
    ("UPDATE programs SET phases = '[[\"a\", \"b\", \"c\"]]'", "programs.phases of row 0"),
    ("UPDATE programs SET times = '{\"check\": \"x\"}'", "programs.times of row 0"),
    ("UPDATE programs SET choices = '[[1], 2]'", "programs.choices of row 0"),
    ("UPDATE programs SET choices = '[{\"x\": 1}]'", "programs.choices of row 0"),
    ("UPDATE meta SET value = '{\"seed\": \"abc\"}' WHERE key = 'settings'", "`seed` is 'abc'"),
])
def test_a_row_verimim_never_writes_is_refused_untouched(tmp_path: Path, edit: str, what: str) -> None:
    # SQLite's page check passes a value edited by hand: the report and a resume stopped with a
    # Python error (E-INTERNAL), a resume after writing a new run row
    d = _journal_edited(tmp_path / "c", edit)
    before = (d / JOURNAL).read_bytes()
    with pytest.raises(UsageError, match=what.replace("(", r"\(")):
        Journal.open(d, Settings(seed=1))
    with pytest.raises(UsageError, match="damaged|settings"):
        Journal.open(d, read_only=True)
    assert (d / JOURNAL).read_bytes() == before


def test_a_campaign_killed_while_its_journal_is_made_can_start_again(tmp_path: Path) -> None:
    # Killed between the schema and its settings, a journal made in place read as "a fuzzing
    # journal of version None": neither resumed nor replaced. Made under a name of its own and
    # linked whole, a kill leaves that name, which the next start removes.
    import subprocess
    import sys

    d = tmp_path / "c"
    code = ("import os, sys; from verimim.fuzz.journal import Journal; from verimim.fuzz.task import Settings; "
            "os.link = lambda *a, **k: os._exit(9); Journal.open(sys.argv[1], Settings(seed=1))")
    killed = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    left = [p.name for p in d.iterdir()]
    assert not (d / JOURNAL).exists() and len(left) == 1 and left[0].startswith(f"{JOURNAL}.new-"), left
    assert Journal.existing(d) is None  # a new campaign may start there
    j = Journal.open(d, Settings(seed=2))
    assert j.settings.seed == 2 and j.count() == 0
    j.close()
    assert sorted(p.name for p in d.iterdir() if not p.name.startswith(JOURNAL + "-")) == [JOURNAL]


def test_a_journal_another_process_made_meanwhile_is_not_overwritten(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    d = tmp_path / "c"
    d.mkdir()
    other = Journal.open(tmp_path / "other", Settings(seed=5))
    other.close()
    real_link = os.link

    def racing_link(src: str, dst: str) -> None:  # another process links its journal first
        real_link(tmp_path / "other" / JOURNAL, dst)
        real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(UsageError, match="being started by another verimim process"):
        Journal.open(d, Settings(seed=1))
    monkeypatch.undo()
    assert Journal.existing(d) == Settings(seed=5)


@pytest.mark.parametrize("edit, what", [
    # an insert of a row verimim writes failed on it after the campaign started (and wrote a run)
    ("ALTER TABLE programs ADD COLUMN extra TEXT", "columns verimim does not write: programs.extra"),
    # a later duplicate stopped the campaign with "no such table"
    ("DROP TABLE duplicates", "lacks the columns duplicates.fingerprint"),
])
def test_a_journal_of_another_shape_is_refused_untouched(tmp_path: Path, edit: str, what: str) -> None:
    d = _journal_edited(tmp_path / "c", edit)
    before = (d / JOURNAL).read_bytes()
    with pytest.raises(UsageError, match=what):
        Journal.open(d, Settings(seed=1))
    assert (d / JOURNAL).read_bytes() == before
