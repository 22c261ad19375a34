"""A campaign's journal: one SQLite file, `DIR/journal.sqlite`, holding every program checked.

Each result is committed on its own as it arrives, in WAL mode, so a campaign killed with
`kill -9` loses only the programs that were still being checked; they are found again as gaps
in the indices and re-run on resume. A program's index is its identity (its seed derives from
the campaign seed and the index), so a program is journaled at most once.

The `programs` table holds distinct programs: an index whose program is the same as one already
drawn (same fingerprint: text, arguments, defect) is not checked again; it goes to `duplicates`,
pointing at the first. Version 1 journals (no fingerprints) are upgraded in place when a campaign
opens them; the report reads them as they are.

A directory is accepted as a campaign only when empty or holding our journal; anything else
(a foreign directory, a corrupt file, another program's SQLite database) is refused before
anything in it is written.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

from verimim.diagnostics import UsageError
from verimim.fuzz.reduce import size
from verimim.fuzz.signature import Signature
from verimim.fuzz.task import Checked, Settings, choices_json

FORMAT = "verimim-fuzz-journal"
VERSION = 2
JOURNAL = "journal.sqlite"

# What version 2 adds to version 1 (also the upgrade of a version 1 journal, with the column).
_V2 = """
CREATE TABLE duplicates (idx INTEGER PRIMARY KEY, run INTEGER NOT NULL, of_idx INTEGER NOT NULL,
                         fingerprint TEXT NOT NULL, finished REAL NOT NULL);
CREATE INDEX programs_fp ON programs(fingerprint);
"""

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY, started REAL NOT NULL, ended REAL, budget REAL,
                   workers INTEGER, scheduler TEXT, command TEXT);
CREATE TABLE programs (idx INTEGER PRIMARY KEY, run INTEGER NOT NULL, seed TEXT NOT NULL,
                       choices TEXT NOT NULL, defect TEXT, features TEXT NOT NULL, ops INTEGER,
                       kernels INTEGER, launches INTEGER, size INTEGER, verdict TEXT NOT NULL,
                       signature TEXT, message TEXT, times TEXT, phases TEXT, worker TEXT,
                       seconds REAL, finished REAL NOT NULL, fingerprint TEXT);
CREATE TABLE failures (signature TEXT PRIMARY KEY, kind TEXT, code TEXT, phase TEXT, site TEXT,
                       first_idx INTEGER, first_run INTEGER, dir TEXT, size_before INTEGER,
                       size_after INTEGER, lines_before INTEGER, lines_after INTEGER,
                       reduce_s REAL, reduce_status TEXT);
CREATE INDEX programs_run ON programs(run);
CREATE INDEX programs_sig ON programs(signature);
""" + _V2


# The columns the campaign and the report use, all of them (a version 1 journal has no
# fingerprint and no duplicates).
_COLUMNS = {
    "runs": {"id", "started", "ended", "budget", "workers", "scheduler", "command"},
    "programs": {"idx", "run", "seed", "choices", "defect", "features", "ops", "kernels", "launches", "size",
                 "verdict", "signature", "message", "times", "phases", "worker", "seconds", "finished",
                 "fingerprint"},
    "failures": {"signature", "kind", "code", "phase", "site", "first_idx", "first_run", "dir", "size_before",
                 "size_after", "lines_before", "lines_after", "reduce_s", "reduce_status"},
    "duplicates": {"idx", "run", "of_idx", "fingerprint", "finished"},
}


# The first row whose value verimim could not have written (SQLite's page check passes a file
# edited by hand, or damaged by another program): JSON columns hold JSON of their shape, times
# are numbers. Such a row would stop the campaign or the report midway with a Python error.
_BAD_ROW = """
SELECT what, id FROM (
  SELECT 'programs.' || CASE
      WHEN NOT json_valid(choices) OR json_type(choices) != 'array' THEN 'choices'
      WHEN EXISTS (SELECT 1 FROM json_each(choices) WHERE type IN ('array', 'null')
                   OR (type = 'object' AND json_type(value, '$.b') IS NOT 'text'
                       AND json_type(value, '$.f') IS NOT 'text')) THEN 'choices'
      WHEN NOT json_valid(features) OR json_type(features) != 'array' THEN 'features'
      WHEN EXISTS (SELECT 1 FROM json_each(features) WHERE type != 'text') THEN 'features'
      WHEN times IS NOT NULL AND (NOT json_valid(times) OR json_type(times) != 'object') THEN 'times'
      WHEN times IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(times) WHERE type NOT IN ('integer', 'real'))
        THEN 'times'
      WHEN phases IS NOT NULL AND (NOT json_valid(phases) OR json_type(phases) != 'array') THEN 'phases'
      WHEN phases IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(phases) WHERE type != 'array'
                   OR json_array_length(value) != 2 OR json_type(value, '$[0]') != 'text'
                   OR json_type(value, '$[1]') != 'text') THEN 'phases'
      WHEN typeof(finished) NOT IN ('real', 'integer') THEN 'finished'
      WHEN seconds IS NOT NULL AND typeof(seconds) NOT IN ('real', 'integer') THEN 'seconds' END AS what,
    idx AS id FROM programs
  UNION ALL
  SELECT 'runs.' || CASE
      WHEN typeof(started) NOT IN ('real', 'integer') THEN 'started'
      WHEN ended IS NOT NULL AND typeof(ended) NOT IN ('real', 'integer') THEN 'ended'
      WHEN budget IS NOT NULL AND typeof(budget) NOT IN ('real', 'integer') THEN 'budget'
      WHEN workers IS NOT NULL AND typeof(workers) != 'integer' THEN 'workers' END, id FROM runs)
WHERE what IS NOT NULL LIMIT 1
"""


def _mistyped_settings(s: Settings) -> str:
    """What in the settings has a type verimim never writes ('' when none)."""
    expect: dict[str, tuple[type, ...]] = {"seed": (int,), "verify": (bool,), "defect_ratio": (float, int),
                                           "gpu": (bool,), "timeout_ms": (int,)}
    for name, types in expect.items():
        value = getattr(s, name)
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            return f"`{name}` is {value!r}"
    return ""


def _connect_ro(path: Path) -> sqlite3.Connection:
    """A connection that writes nothing into the directory. Opening a WAL-mode database, even
    read-only, makes its `-wal` and `-shm` files; where there is no `-wal` (no campaign writing
    it, none killed with pages left in it) the file alone is the whole database and is opened as
    immutable, which makes none. A journal with a `-wal` has its side files already."""
    wal = path.with_name(path.name + "-wal")
    mode = "ro" if wal.exists() else "ro&immutable=1"
    return sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode={mode}", uri=True)


# A journal being made by process PID (Journal._create): `journal.sqlite.new-PID`, with SQLite's
# own `-journal` beside it.
_NEW_PREFIX = f"{JOURNAL}.new-"


def _is_leftover(p: Path) -> bool:
    """A journal a killed process was making (its process is gone): no part of a campaign."""
    if not p.name.startswith(_NEW_PREFIX):
        return False
    pid = p.name[len(_NEW_PREFIX):].removesuffix("-journal")
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # (alive, another user's)
    return int(pid) == os.getpid()  # (this process's own, from an earlier attempt)


def _remove_leftovers(d: Path) -> None:
    for p in d.iterdir():
        if _is_leftover(p):
            p.unlink(missing_ok=True)


def _writable(d: Path, path: Path | None = None) -> None:
    """UsageError naming what a campaign could not write: the directory (or the nearest one that
    exists, where it is still to be made), or the journal file."""
    where = d
    while not where.exists() and where != where.parent:
        where = where.parent
    if not os.access(where, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write the campaign directory `{where}`: permission denied")
    if path is not None and path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"cannot write the campaign journal `{path}`: permission denied (it is read-only)")


@dataclass(frozen=True)
class FailureRow:
    signature: Signature
    key: str
    first_idx: int
    first_run: int
    dir: str
    size_before: int | None
    size_after: int | None
    lines_before: int | None
    lines_after: int | None
    reduce_s: float | None
    reduce_status: str | None
    count: int


class Journal:
    def __init__(self, directory: Path, conn: sqlite3.Connection, read_only: bool = False) -> None:
        self.dir = directory
        self.conn = conn
        self.read_only = read_only
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self._has_duplicates = "duplicates" in tables  # a version 1 journal read as it is has none

    def failure_dir(self, stored: str) -> Path:
        """Where a failure's files are: its `dir` is kept relative to the campaign directory
        (`failures/<signature>`), so the report finds them from any working directory and after
        the campaign directory moved. Older journals kept the path as the campaign was given it;
        the failure's own folder name is the same in both."""
        p = Path(stored)
        if p.is_absolute() and p.exists():
            return p
        return self.dir / "failures" / p.name

    # ------------------------------------------------------------------ opening

    @staticmethod
    def open(directory: str | Path, settings: Settings | None = None, read_only: bool = False,
             validated: bool = False) -> "Journal":
        """Open the campaign in `directory`, creating it when the directory is new or empty.
        `settings` are those of a new campaign; an existing one keeps its own. `read_only` (the
        report): nothing in the directory is written, an old journal is read as it is.
        `validated`: the caller has just validated the existing journal (`existing`) and holds
        its `lock`, so it is not read through again."""
        d = Path(directory)
        path = d / JOURNAL
        exists = validated and path.exists()
        if not exists and not Journal.probe(d, create=settings is not None):
            assert settings is not None  # probe refuses a missing campaign without them
            _writable(d)
            Journal._create(d, settings)
            try:
                return Journal._ready(d, sqlite3.connect(path, isolation_level=None))
            except sqlite3.Error as e:
                raise UsageError(f"cannot write the campaign journal `{path}`: {e}") from None
        if read_only:
            return Journal(d, _connect_ro(path), read_only=True)
        _writable(d, path)
        try:
            conn = sqlite3.connect(path, isolation_level=None)
            Journal._upgrade(conn)
            return Journal._ready(d, conn)
        except sqlite3.Error as e:
            raise UsageError(f"cannot write the campaign journal `{path}`: {e}") from None

    @staticmethod
    def _create(d: Path, settings: Settings) -> None:
        """A new journal, whole or not at all: made complete under a name of this process's own,
        then linked to its name, which fails where another process made one meanwhile. (Made in
        place, a campaign killed while it was made left a journal without its settings, which
        neither resumed nor let a new campaign start there.)"""
        path = d / JOURNAL
        tmp = d / f"{_NEW_PREFIX}{os.getpid()}"
        try:
            d.mkdir(parents=True, exist_ok=True)
            _remove_leftovers(d)
            tmp.unlink(missing_ok=True)
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                meta = {"format": FORMAT, "version": str(VERSION), "created": str(time.time()),
                        "settings": json.dumps(settings.to_json())}
                conn.executescript("BEGIN;" + _SCHEMA)
                conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
                conn.execute("COMMIT")
            finally:
                conn.close()
            os.link(tmp, path)
        except FileExistsError:
            raise UsageError(f"the campaign in `{d}` is being started by another verimim process; wait "
                             f"for it to start (or stop it), then resume") from None
        except (OSError, sqlite3.Error) as e:
            raise UsageError(f"cannot create the campaign journal `{path}`: {e}") from None
        finally:
            tmp.unlink(missing_ok=True)

    @staticmethod
    def lock(d: Path) -> int:
        """Hold the campaign in `d` for this process (an exclusive `flock` on its journal, which
        SQLite's own POSIX locks do not touch), until the returned descriptor is closed. Two
        campaigns on one directory would draw the same programs and each throw the other's
        results away: the second is refused."""
        import fcntl

        path = d / JOURNAL
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(f"the campaign in `{d}` is being run by another verimim process; wait for it "
                             f"to end (or stop it), then resume") from None
        return fd

    @staticmethod
    def in_use(d: Path) -> bool:
        """Whether a verimim process runs the campaign in `d` now (holds its `lock`)."""
        import fcntl

        try:
            fd = os.open(d / JOURNAL, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # (closing it releases a lock taken here)

    @staticmethod
    def probe(d: Path, create: bool = True) -> bool:
        """True when `d` holds a campaign, False when one may be created there (it is absent
        or empty); UsageError for anything else. Writes nothing."""
        return Journal.existing(d, create) is not None

    @staticmethod
    def existing(d: Path, create: bool = True) -> Settings | None:
        """The settings of the campaign in `d`, its journal validated; None when one may be
        created there (it is absent or empty); UsageError for anything else. Writes nothing."""
        path = d / JOURNAL
        if d.exists() and not d.is_dir():
            raise UsageError(f"campaign directory `{d}` is a file, not a directory")
        if path.exists():
            return Journal._validate(path)
        if d.exists() and any(not _is_leftover(p) for p in d.iterdir()):
            raise UsageError(f"`{d}` is not a fuzzing campaign: it is not empty and holds no {JOURNAL}")
        if not create:
            raise UsageError(f"`{d}` is not a fuzzing campaign: no {JOURNAL}")
        return None

    @staticmethod
    def _validate(path: Path) -> Settings:
        """The settings of `path` once it is known to be an intact journal of ours: our format
        and version in `meta`, the tables and columns we read and write, settings a campaign can
        resume with, every row as verimim writes it, and SQLite's own check of every page (a
        file damaged past its first pages reads as a journal until a query reaches the damage,
        mid-campaign). Opened read-only, and closed again."""
        try:
            ro = _connect_ro(path)
        except sqlite3.DatabaseError as e:  # (a page it cannot read shows in the queries below)
            raise UsageError(f"`{path}` is not a verimim fuzzing journal ({e}); nothing was written to it") from None
        try:
            return Journal._checked(path, ro)
        finally:
            ro.close()

    @staticmethod
    def _checked(path: Path, ro: sqlite3.Connection) -> Settings:
        try:
            rows = dict(ro.execute("SELECT key, value FROM meta").fetchall())
            tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            columns = {t: {r[1] for r in ro.execute(f"PRAGMA table_info({t})")} for t in _COLUMNS if t in tables}
            damage = [r[0] for r in ro.execute("PRAGMA quick_check(3)")] if rows.get("format") == FORMAT else []
        except sqlite3.DatabaseError as e:
            what = "a damaged SQLite database" if "malformed" in str(e) else "not a verimim fuzzing journal"
            raise UsageError(f"`{path}` is {what} ({e}); nothing was written to it") from None
        if rows.get("format") != FORMAT or not {"runs", "programs", "failures"} <= tables:
            raise UsageError(f"`{path}` is an SQLite database but not a verimim fuzzing journal")
        if rows.get("version") not in ("1", str(VERSION)):
            raise UsageError(f"`{path}` is a fuzzing journal of version {rows.get('version')}, "
                             f"this verimim reads versions 1 and {VERSION}")
        if damage != ["ok"]:
            raise UsageError(f"`{path}` is a damaged fuzzing journal (SQLite's integrity check: "
                             f"{'; '.join(damage).replace(chr(10), '; ')}); nothing was written to it")
        v1 = rows.get("version") == "1"  # (no fingerprint column, no duplicates table)
        missing = [f"{t}.{c}" for t, cols in _COLUMNS.items() for c in sorted(cols - columns.get(t, set()))
                   if not (v1 and (c == "fingerprint" or t == "duplicates"))]
        if missing:
            more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
            raise UsageError(f"`{path}` claims to be a fuzzing journal but lacks the columns "
                             f"{', '.join(missing[:4])}{more}")
        extra = [f"{t}.{c}" for t, cols in columns.items() for c in sorted(cols - _COLUMNS[t])]
        if extra:
            # (an insert of a row verimim writes would fail on it, after the campaign started)
            raise UsageError(f"`{path}` claims to be a fuzzing journal but has columns verimim does not "
                             f"write: {', '.join(extra[:4])}; nothing was written to it")
        try:
            settings = Settings(**json.loads(rows.get("settings", "")))
        except (ValueError, TypeError) as e:
            raise UsageError(f"`{path}` is a fuzzing journal without valid campaign settings ({e})") from None
        wrong = _mistyped_settings(settings)
        if wrong:
            raise UsageError(f"`{path}` is a fuzzing journal without valid campaign settings ({wrong})")
        bad = ro.execute(_BAD_ROW).fetchone()
        if bad is not None:
            raise UsageError(f"`{path}` is a damaged fuzzing journal: {bad[0]} of row {bad[1]} is not what "
                             f"verimim writes there; nothing was written to it")
        return settings

    @staticmethod
    def _upgrade(conn: sqlite3.Connection) -> None:
        """A version 1 journal made version 2 (when it is opened for a run, never by `probe`)."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        if row is not None and row[0] == "1":
            conn.executescript("BEGIN; ALTER TABLE programs ADD COLUMN fingerprint TEXT;" + _V2
                               + f"UPDATE meta SET value = '{VERSION}' WHERE key = 'version'; COMMIT;")

    @staticmethod
    def _ready(d: Path, conn: sqlite3.Connection) -> "Journal":
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable across a killed process (not a power cut)
            conn.execute("PRAGMA busy_timeout=5000")
        except sqlite3.Error as e:
            conn.close()
            raise UsageError(f"cannot write the campaign journal `{d / JOURNAL}`: {e}") from None
        return Journal(d, conn)

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ campaign

    @property
    def settings(self) -> Settings:
        raw = json.loads(self.meta("settings"))
        return Settings(**raw)

    def meta(self, key: str) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else ""

    def start_run(self, budget: float, workers: int, scheduler: str | None, command: str) -> int:
        cur = self.conn.execute("INSERT INTO runs (started, budget, workers, scheduler, command) VALUES (?, ?, ?, ?, ?)",
                                (time.time(), budget, workers, scheduler, command))
        return int(cur.lastrowid or 0)

    def roll_back_unfinished(self) -> None:
        """Abandon a transaction an interrupt left open (a program half journaled): it is checked
        again on resume, as after a kill."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def end_run(self, run: int) -> None:
        self.conn.execute("UPDATE runs SET ended = ? WHERE id = ?", (time.time(), run))

    def runs(self) -> list[dict[str, Any]]:
        cols = ("id", "started", "ended", "budget", "workers", "scheduler", "command")
        return [dict(zip(cols, r)) for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY id")]

    # ------------------------------------------------------------------ programs

    def todo(self) -> Iterator[int]:
        """Indices to check next: first the gaps below the highest journaled index (programs in
        flight when a run was killed), then new ones."""
        union = " UNION SELECT idx FROM duplicates" if self._has_duplicates else ""
        done = {r[0] for r in self.conn.execute("SELECT idx FROM programs" + union)}
        top = max(done, default=-1)
        gaps = [i for i in range(top + 1) if i not in done]
        yield from gaps
        i = top + 1
        while True:
            yield i
            i += 1

    def record(self, run: int, c: Checked, failure_dir: str | None = None) -> bool:
        """Journal one program (False when that index is journaled already); with `failure_dir`,
        also its signature as a new failure, in the same transaction, so that a kill between the
        two never leaves a journaled failure without its directory."""
        try:
            self.conn.execute("BEGIN")
            self.conn.execute(
                "INSERT INTO programs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (c.index, run, str(c.seed), choices_json(c.choices), c.defect, json.dumps(list(c.features)),
                 c.ops, c.kernels, c.launches, c.size, c.verdict, c.signature.key if c.signature else None,
                 c.message, json.dumps(dict(c.times)), json.dumps([list(p) for p in c.phases]), c.worker,
                 c.seconds, c.finished, c.fingerprint or None))
            if failure_dir is not None and c.signature is not None:
                # sizes as the reducer measures them (the plugin header left out), so they compare
                self._add_failure(c.signature, c.index, run, failure_dir, *size(c.text))
            self.conn.execute("COMMIT")
        except sqlite3.IntegrityError:
            self.conn.execute("ROLLBACK")
            return False
        return True

    def record_duplicate(self, run: int, index: int, of_index: int, fingerprint: str) -> bool:
        """Journal index `index` as a duplicate of the program `of_index` (False when that index
        is journaled already)."""
        try:
            self.conn.execute("INSERT INTO duplicates VALUES (?, ?, ?, ?, ?)",
                              (index, run, of_index, fingerprint, time.time()))
        except sqlite3.IntegrityError:
            return False
        return True

    def fingerprints(self) -> dict[str, int]:
        """The first index journaled with each fingerprint."""
        if not self._has_duplicates:
            return {}
        return {fp: int(i) for fp, i in self.conn.execute(
            "SELECT fingerprint, min(idx) FROM programs WHERE fingerprint IS NOT NULL GROUP BY fingerprint")}

    def duplicates(self, run: int | None = None) -> int:
        if not self._has_duplicates:
            return 0
        if run is None:
            return int(self.conn.execute("SELECT count(*) FROM duplicates").fetchone()[0])
        return int(self.conn.execute("SELECT count(*) FROM duplicates WHERE run = ?", (run,)).fetchone()[0])

    def count(self, run: int | None = None) -> int:
        if run is None:
            return int(self.conn.execute("SELECT count(*) FROM programs").fetchone()[0])
        return int(self.conn.execute("SELECT count(*) FROM programs WHERE run = ?", (run,)).fetchone()[0])

    def programs(self) -> list[dict[str, Any]]:
        cur = self.conn.execute("SELECT * FROM programs ORDER BY finished")
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def program(self, index: int) -> dict[str, Any] | None:
        cur = self.conn.execute("SELECT * FROM programs WHERE idx = ?", (index,))
        cols = [c[0] for c in cur.description]
        row = cur.fetchone()
        return dict(zip(cols, row)) if row else None

    # ------------------------------------------------------------------ failures

    def _add_failure(self, sig: Signature, first_idx: int, run: int, directory: str, size: int, lines: int) -> None:
        self.conn.execute("INSERT INTO failures (signature, kind, code, phase, site, first_idx, first_run, dir, "
                          "size_before, lines_before) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          (sig.key, sig.kind, sig.code, sig.phase, sig.where, first_idx, run, directory, size, lines))

    def reduced(self, key: str, size: int, lines: int, seconds: float, status: str) -> None:
        self.conn.execute("UPDATE failures SET size_after = ?, lines_after = ?, reduce_s = ?, reduce_status = ? "
                          "WHERE signature = ?", (size, lines, round(seconds, 2), status, key))

    def failures(self) -> list[FailureRow]:
        counts = dict(self.conn.execute("SELECT signature, count(*) FROM programs WHERE signature IS NOT NULL "
                                        "GROUP BY signature").fetchall())
        out = []
        for r in self.conn.execute("SELECT signature, kind, code, phase, site, first_idx, first_run, dir, size_before, "
                                   "size_after, lines_before, lines_after, reduce_s, reduce_status FROM failures "
                                   "ORDER BY first_run, first_idx"):
            out.append(FailureRow(Signature(r[1], r[2], r[3], r[4]), r[0], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                                  r[12], r[13], int(counts.get(r[0], 0))))
        return out

    def unreported(self, run: int) -> list[FailureRow]:
        """The failures first found by a run that never ended (killed before it could report them),
        and no run after it ended (which reported them) but `run`: new to `run`."""
        ended = [r["id"] for r in self.runs() if r["ended"] is not None]
        return [f for f in self.failures()
                if f.first_run != run and not any(e >= f.first_run for e in ended)]

    def reduction_lost(self, key: str) -> None:
        """The failure's reduced program is gone (its directory was written again): reduce anew."""
        self.conn.execute("UPDATE failures SET size_after = NULL, lines_after = NULL, reduce_s = NULL, "
                          "reduce_status = NULL WHERE signature = ?", (key,))

    def known(self, key: str) -> bool:
        return self.conn.execute("SELECT 1 FROM failures WHERE signature = ?", (key,)).fetchone() is not None
