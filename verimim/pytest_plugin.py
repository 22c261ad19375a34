"""The verimim pytest plugin: `.mim` regression files as test items, plus fixtures and a marker.

Registered as the `pytest11` entry point `verimim`, so installing verimim activates it.

Collection: a `*.mim` file becomes a `MimFile` when it is named on the command line or lies under
a directory of the ini option `verimim_paths` (relative to rootdir). Its `// KEY: value` comment
annotations decide which items it gets (see `MimFile.aspects`):

    check        `verimim check` accepts the program, or reports its EXPECT-ERROR (at EXPECT-LOC)
                 when that is a front-end code or a phase code that check reports
    run[interp]  `verimim run` on the reference interpreter gives EXPECT / EXPECT-WARNING, or the
                 run-time EXPECT-ERROR (at EXPECT-LOC); ARGS and FUEL are honoured. Only for
                 files with EXPECT, or an EXPECT-ERROR that `check` does not report
    run[gpu]     the same compiled and run on a GPU (skipped without a CUDA device); a file whose
                 program the GPU backend does not compile says so with `// EXPECT-GPU-ERROR:
                 CODE` (E-UNSUPPORTED: `direct.cps2ds` in compiled host code, ...), and its GPU run must report it
    filecheck    the `// CHECK:` lines (FileCheck syntax) match `verimim dump [--after PHASE]`,
                 PHASE from `// CHECK-AFTER: PHASE`

Failures are reported as "expected … / found …" plus the rendered diagnostics, never as a
traceback of this plugin.
"""
from __future__ import annotations

import difflib
import io
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from _pytest._code.code import ReprFileLocation, TerminalRepr
from _pytest._io import TerminalWriter

from verimim import driver

# Codes only the front end reports: such a program never runs.
FRONTEND_CODES = frozenset({"E-PARSE", "E-NAME", "E-TYPE", "E-IMPORT"})
# Codes a checker phase of `verimim check` reports, but which the interpreter may also report at
# run time (E-ADDR-SPACE: host code reading device memory). Which of the two a file means is only
# known from what `check` does with it (MimFile.phase_code_checked): its `run[interp]` item is
# skipped when check rejects the program with it. (Not decided at collection: a `--collect-only`
# or `-k` selection must not run check on every such file.)
PHASE_CODES = frozenset({"E-ADDR-SPACE", "E-MEM-CROSSING", "E-UNSUPPORTED"})
NO_PHASES_REASON = "phase checkers land with the phases issue"

_ANNOTATION = re.compile(r"\s*//\s*([A-Z][A-Z-]*):\s*(.*?)\s*$")
# `/// KEY:`, `/* KEY: … */`, `// KEY : v`, `// EXPECT_ERROR: v`: a key in the wrong comment or
# spelling, which the annotation pattern does not take (so it would be silently ignored)
_OFF_FORM = re.compile(r"\s*(/{3,}|/\*+|//)\s*([A-Za-z][A-Za-z_-]*)(\s+:|:)")
# `plugin core;` / `import foo;`: still the top of the file, where annotations may stand
_DECLARATION = re.compile(r"(plugin|import)\s+[\w.]+\s*;\s*(//.*)?$")
_CHECK_DIRECTIVE = r"CHECK(-(NEXT|SAME|NOT|DAG|LABEL|EMPTY|COUNT-\d+))?:"
_CHECK_LINE = re.compile(r"\s*//\s*" + _CHECK_DIRECTIVE)
# FileCheck reads a directive anywhere on a line (after code, in a `/* … */` comment), not
# after a word character (`XCHECK:` is none)
_CHECK_ANYWHERE = re.compile(r"(?<![A-Za-z0-9_-])" + _CHECK_DIRECTIVE)
# A comment that starts with a word, then maybe a colon: a misspelt annotation is one of these.
_KEYLIKE = re.compile(r"\s*//\s*([A-Za-z][A-Za-z-]*)(\s*:|\s+\S)")
# A key on a line inside a `/* … */` comment: `EXPECT: 5`, ` * EXPECT: 5`, `// EXPECT: 5`
_BLOCK_LINE_KEY = re.compile(r"\s*(\*+\s*|//\s*)?([A-Z][A-Z_-]*)\s*:")
KEYS = ("ARGS", "EXPECT", "EXPECT-ERROR", "EXPECT-WARNING", "EXPECT-LOC", "FUEL", "CHECK-AFTER",
        "KERNEL-RACES", "WHY", "EXPECT-GPU-ERROR")
# Other test tools' words for these keys, which a header comment `// WORD: value` most likely means.
SYNONYMS = {"RESULT": "EXPECT", "RETURNS": "EXPECT", "RETURN": "EXPECT", "EXIT": "EXPECT",
            "ERROR": "EXPECT-ERROR", "ERRORS": "EXPECT-ERROR", "THROWS": "EXPECT-ERROR", "FAILS": "EXPECT-ERROR",
            "WARNING": "EXPECT-WARNING", "WARNINGS": "EXPECT-WARNING", "WARN": "EXPECT-WARNING",
            "LOC": "EXPECT-LOC", "LOCATION": "EXPECT-LOC", "ARGV": "ARGS", "ARGUMENTS": "ARGS", "ARG": "ARGS",
            "STEPS": "FUEL", "EXIT-CODE": "EXPECT", "EXITCODE": "EXPECT"}
_SYNONYM_VALUE = {"EXPECT": r"-?\d+", "EXPECT-ERROR": r"E-[A-Z-]+", "EXPECT-WARNING": r"W-[A-Z-]+(?:[\s,]+W-[A-Z-]+)*",
                  "EXPECT-LOC": r"\d+:\d+", "FUEL": r"\d+"}


def _is_key_word(word: str) -> bool:
    """Whether a comment's first word names an annotation or reads as one (`EXPECT…`): such a
    key where annotations are not read is a problem. (Not other tools' words, which are prose
    as often — `WARNING: slow` —, nor `CHECK…`, which FileCheck reads in any comment.)"""
    word = word.upper().replace("_", "-")
    return (word in KEYS or word.startswith("EXPECT")) and not word.startswith("CHECK")


# What `// KERNEL-RACES:` may say: the races status every kernel of `check --json` must have.
RACE_STATUSES = ("proved", "bounded", "unknown")
_CHECK_DIRECTIVES = ("CHECK", "CHECK-NEXT", "CHECK-SAME", "CHECK-NOT", "CHECK-DAG", "CHECK-LABEL",
                     "CHECK-EMPTY", "CHECK-COUNT")


# --------------------------------------------------------------------------------------------
# annotations


@dataclass
class Annotations:
    values: dict[str, str] = field(default_factory=dict)  # each key's one value
    warnings: list[str] = field(default_factory=list)  # every EXPECT-WARNING code
    has_checks: bool = False  # any `// CHECK…:` FileCheck directive
    problems: list[str] = field(default_factory=list)  # "line N: what is wrong", for the file's one failure
    lines: dict[str, int] = field(default_factory=dict)  # where each key is

    @classmethod
    def parse(cls, text: str) -> Annotations:
        """The annotations of the file's header (its leading comments, blank lines and `plugin` /
        `import` declarations); a key written further down is an error, not an annotation: a
        comment in the code must not change what the test checks. `// CHECK…:` lines may stand
        anywhere (FileCheck's way)."""
        ann = cls()
        header, in_block = True, False
        for number, line in enumerate(text.lstrip("\ufeff").splitlines(), 1):
            if _CHECK_LINE.match(line):
                ann.has_checks = True
                continue
            found = _CHECK_ANYWHERE.search(line)
            if found is not None and "COM:" not in line[:found.start()]:
                # FileCheck's, wherever it stands (the dump is matched against it); not one its
                # `COM:` comments out
                ann.has_checks = True
            stripped = line.strip()
            opens = stripped.startswith("/*")
            header = header and (in_block or opens or not stripped or stripped.startswith("//")
                                 or _DECLARATION.match(stripped) is not None)
            inside = in_block  # a line within a block comment opened on an earlier line
            if opens or in_block:
                in_block = "*/" not in stripped[2 if opens else 0:]
                if not in_block:
                    ann._after_block_comment(number, line)
            if inside:
                ann._in_block_comment(number, line)
                continue
            ann._after_code(number, line)
            m = _ANNOTATION.match(line)
            if m is None or m.group(1) not in KEYS:
                if header:
                    ann._misspelt(number, line)
                continue
            key, value = m.group(1), m.group(2)
            if not header:
                ann.problems.append(f"line {number}: `// {key}:` below the program's first definition; "
                                    f"annotations go in the comments at the top of the file")
                continue
            if not value and key not in ("WHY", "ARGS"):
                ann.problems.append(f"line {number}: `// {key}:` has no value")
                continue
            if key == "EXPECT-WARNING":
                ann.warnings.extend(c for c in re.split(r"[\s,]+", value) if c)
                ann.lines.setdefault(key, number)
                continue
            if key in ann.values:
                ann.problems.append(f"line {number}: a second `// {key}:` (line {ann.lines[key]} has one); "
                                    f"give each once")
                continue
            ann.values[key], ann.lines[key] = value, number
        ann._validate()
        return ann

    def _in_block_comment(self, number: int, line: str) -> None:
        """A key on a line of a `/* … */` comment (`EXPECT: 5`, or `// EXPECT: 5` commented out):
        not read, and it must not look as if it were."""
        m = _BLOCK_LINE_KEY.match(line)
        if m is not None and _is_key_word(m.group(2)):
            self.problems.append(f"line {number}: `{line.strip()}` stands in a `/* … */` comment and is not "
                                 f"read; annotations are `// KEY: value` lines outside block comments")

    def _after_block_comment(self, number: int, line: str) -> None:
        """A key in a line comment after a `/* … */` comment closed on its line (`/* x */ // EXPECT: 5`,
        `*/ // EXPECT: 5`): annotations are comment lines of their own."""
        rest = line[line.find("*/") + 2:]
        m = _KEYLIKE.match(rest)
        if m is not None and m.group(2).strip() == ":" and _is_key_word(m.group(1)):
            self.problems.append(f"line {number}: `{rest.strip()}` follows a `/* … */` comment on its line and "
                                 f"is not read; write it on a line of its own at the top of the file")
        elif rest.strip():
            self._misspelt(number, rest)  # (`/// EXPECT: 5`, `/* EXPECT: 5 */`, `// RESULT: 5` there)

    def _after_code(self, number: int, line: str) -> None:
        """A key in a comment after code (`plugin core; // EXPECT: 5`, `return (m, x); // EXPECT: 5`):
        annotations are comment lines of their own."""
        cut = line.find("//")
        if cut <= 0 or not line[:cut].strip() or line[:cut].lstrip().startswith(("/*", "*")):
            return
        m = _KEYLIKE.match(line[cut:])
        if m is not None and m.group(2).strip() == ":" and _is_key_word(m.group(1)):
            self.problems.append(f"line {number}: `{line[cut:].strip()}` follows code on its line and is not "
                                 f"read; write it on a line of its own at the top of the file")

    def _misspelt(self, number: int, line: str) -> None:
        """A header comment that reads like an annotation but is none (`// EXPECT 41`,
        `// expect: 41`, `// EXPECTED: 41`, `// EXPECT : 41`, `/// EXPECT: 41`, `// RESULT: 41`):
        silently ignored, it would leave a wrong expectation untested."""
        off = _OFF_FORM.match(line)
        if off is not None:
            word = off.group(2).upper().replace("_", "-")
            key = word if word in KEYS or word in _CHECK_DIRECTIVES else SYNONYMS.get(word)
            if key is not None and word not in KEYS and word not in _CHECK_DIRECTIVES:
                # another tool's word: only with a value of the key's kind (`// ERROR: E-OOB`, not
                # the prose `// WARNING: this one is slow`)
                value = line[off.end():].strip().rstrip("*/").strip()
                key = key if re.fullmatch(_SYNONYM_VALUE.get(key, r".+"), value) else None
            if key is not None and (off.group(1) != "//" or off.group(3) != ":" or off.group(2) != key):
                what = "no FileCheck directive" if key in _CHECK_DIRECTIVES else "not an annotation"
                self.problems.append(f"line {number}: `{line.strip()}` is {what}; write `// {key}: …`")
                return
        m = _KEYLIKE.match(line)
        if m is None:
            return
        word, colon = m.group(1), m.group(2).strip() == ":"
        if word.upper() in _CHECK_DIRECTIVES:  # (a well-formed one matched _CHECK_LINE)
            if colon or word == word.upper():
                self.problems.append(f"line {number}: `{line.strip()}` is no FileCheck directive; write "
                                     f"`// {word.upper()}: …`")
            return
        if word.upper() in KEYS:
            # `EXPECT 41` or `expect: 41`; prose (`// Expect the sum …`) is neither
            if (word == word.upper()) != colon:
                self.problems.append(f"line {number}: `{line.strip()}` is not an annotation; write "
                                     f"`// {word.upper()}: …`")
            return
        near = difflib.get_close_matches(word.upper(), [*KEYS, *_CHECK_DIRECTIVES], n=1, cutoff=0.8)
        if near and (colon or word == word.upper()):
            self.problems.append(f"line {number}: unknown annotation `{word}`; did you mean `{near[0]}`?")
            return
        if colon and word == word.upper() and word.startswith("EXPECT"):
            # `EXPECT-RESULT:`, `EXPECT-OUTPUT:`, `EXPECTED-RESULT:`: an expectation by its name
            self.problems.append(f"line {number}: unknown annotation `{word}`; the annotations are "
                                 f"{', '.join(KEYS)} (and FileCheck's CHECK lines)")

    def _validate(self) -> None:
        from verimim import explain

        def at(key: str) -> str:
            return f"line {self.lines.get(key, '?')}"

        expect, error = self.values.get("EXPECT"), self.values.get("EXPECT-ERROR")
        if expect is not None and not re.fullmatch(r"-?\d+", expect):
            self.problems.append(f"{at('EXPECT')}: `// EXPECT: {expect}` is not an integer")
        if error is not None and (not error.startswith("E-") or explain.lookup(error) is None):
            self.problems.append(f"{at('EXPECT-ERROR')}: `{error}` is not an error code (`verimim explain` lists them)")
        gpu_error = self.values.get("EXPECT-GPU-ERROR")
        if gpu_error is not None and (not gpu_error.startswith("E-") or explain.lookup(gpu_error) is None):
            self.problems.append(f"{at('EXPECT-GPU-ERROR')}: `{gpu_error}` is not an error code")
        if gpu_error is not None and expect is None:
            self.problems.append(f"{at('EXPECT-GPU-ERROR')}: EXPECT-GPU-ERROR goes with an EXPECT result "
                                 f"(what the interpreter gives)")
        for w in self.warnings:
            if not w.startswith("W-") or explain.lookup(w) is None:
                self.problems.append(f"{at('EXPECT-WARNING')}: `{w}` is not a warning code")
        if expect is not None and error is not None:
            self.problems.append(f"{at('EXPECT')}: EXPECT (a result) and EXPECT-ERROR (no result) contradict each other")
        if self.warnings and expect is None:
            self.problems.append(f"{at('EXPECT-WARNING')}: EXPECT-WARNING is checked with an EXPECT result only")
        loc = self.values.get("EXPECT-LOC")
        if loc is not None:
            if not re.fullmatch(r"[1-9]\d*:[1-9]\d*", loc):
                self.problems.append(f"{at('EXPECT-LOC')}: `{loc}` is not LINE:COL (both from 1)")
            if error is None and not self.warnings:
                self.problems.append(f"{at('EXPECT-LOC')}: EXPECT-LOC places an EXPECT-ERROR or EXPECT-WARNING; "
                                     f"there is none")
        fuel = self.values.get("FUEL")
        if fuel is not None and not re.fullmatch(r"[1-9]\d*", fuel):
            self.problems.append(f"{at('FUEL')}: `{fuel}` is not a positive step count")
        args = self.values.get("ARGS")
        if args is not None:
            try:
                shlex.split(args)
            except ValueError as e:
                self.problems.append(f"{at('ARGS')}: `{args}` cannot be split as a shell would ({e})")
        races = self.values.get("KERNEL-RACES")
        if races is not None and races not in RACE_STATUSES:
            self.problems.append(f"{at('KERNEL-RACES')}: `{races}` is not a status; one of {', '.join(RACE_STATUSES)}")
        if races is not None and error is not None:
            self.problems.append(f"{at('KERNEL-RACES')}: KERNEL-RACES states the verdict on a program `check` "
                                 f"accepts; this one expects {error}")
        if "CHECK-AFTER" in self.values and not self.has_checks:
            self.problems.append(f"{at('CHECK-AFTER')}: CHECK-AFTER without any `// CHECK:` line checks nothing")

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    @property
    def args(self) -> list[str]:
        """main's arguments, split as a POSIX shell splits them (`"a b"` is one argument)."""
        return shlex.split(self.get("ARGS") or "")

    @property
    def fuel(self) -> int | None:
        fuel = self.get("FUEL")
        return int(fuel) if fuel else None

    @property
    def loc(self) -> tuple[int, int] | None:
        loc = self.get("EXPECT-LOC")
        if not loc:
            return None
        line, col = loc.split(":")
        return int(line), int(col)


class MimTestFailure(Exception):
    """A `.mim` expectation that does not hold; its message is the whole failure report, its
    `summary` the one line pytest's short summary and JUnit's `message` show (the report's first
    line where none is given)."""

    def __init__(self, message: str, summary: str = "") -> None:
        super().__init__(message)
        self.summary = summary or message.split("\n", 1)[0]


class MimFailureRepr(TerminalRepr):
    """A failure's report as pytest prints it, with its one-line summary as the `reprcrash`
    message: `FAILED a.mim::run[interp] - expected result 41, found result 42` rather than the
    command, which the node id already names."""

    def __init__(self, text: str, summary: str, path: Path) -> None:
        self.text = text
        self.reprcrash = ReprFileLocation(str(path), 1, summary)

    def toterminal(self, tw: TerminalWriter) -> None:
        for line in self.text.splitlines():
            tw.line(line)


class MimAnnotationError(MimTestFailure):
    pass


def _diagnostics_text(report: driver.Report) -> str:
    if not report.diagnostics:
        return "  (no diagnostics)"
    lines = ["  " + line for d in report.diagnostics for line in d.render().splitlines()]
    if report.traceback:  # verimim's own internal error (E-INTERNAL): worth showing
        lines += ["  verimim traceback:"] + ["    " + t for t in report.traceback.rstrip().splitlines()]
    return "\n".join(lines)


def _fail(what: str, expected: str, found: str, report: driver.Report | None = None) -> NoReturn:
    msg = f"{what}\n  expected: {expected}\n  found:    {found}"
    if report is not None:
        msg += "\ndiagnostics:\n" + _diagnostics_text(report)
    raise MimTestFailure(msg, f"expected {_one_line(expected)}, found {_one_line(found)}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _first_error(report: driver.Report) -> Any:
    return next((d for d in report.diagnostics if d.severity == "error"), None)


def _where(diag: Any) -> str:
    return f"{diag.loc.line}:{diag.loc.col}" if diag is not None and diag.loc and diag.loc.line else "no location"


def _expect_error(what: str, report: driver.Report, code: str, loc: tuple[int, int] | None,
                  path: Path | None = None) -> None:
    """The report's first error (or, for a W- code, a warning) is `code`, at `loc` of the file
    `path` if given (a diagnostic placed in another file, a plugin's, is not at `loc`)."""
    if code.startswith("W-"):
        diag = next((d for d in report.diagnostics if d.code == code), None)
        if diag is None:
            _fail(what, f"warning {code}", ", ".join(d.code for d in report.diagnostics) or "no diagnostics", report)
    else:
        diag = _first_error(report)
        if diag is None or diag.code != code:
            found = f"error {diag.code}" if diag is not None else _ok_summary(report)
            _fail(what, f"error {code}", found, report)
        if report.exit_code != 1:
            _fail(what, "exit code 1", f"exit code {report.exit_code}", report)
    if loc is None:
        return
    elsewhere = path is not None and diag.loc is not None and diag.loc.line and not _same_file(diag.loc.file, path)
    if diag.loc is None or (diag.loc.line, diag.loc.col) != loc or elsewhere:
        found = f"{diag.loc}" if elsewhere else _where(diag)
        _fail(what, f"{code} at {loc[0]}:{loc[1]}", f"{code} at {found}", report)


def _same_file(name: str, path: Path) -> bool:
    try:
        return Path(name).resolve() == path.resolve()
    except OSError:
        return False


def _shown(path: Path) -> str:
    """The file as a command run from the working directory names it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _ok_summary(report: driver.Report) -> str:
    if "result" in report.data and report.ok:
        return f"success, result {report.data['result']}"
    return "no error" if report.ok else f"exit code {report.exit_code}"


# --------------------------------------------------------------------------------------------
# collection


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("verimim_paths", type="linelist", default=[],
                  help="directories (relative to rootdir) whose *.mim files are verimim regression tests")
    parser.addini("verimim_include", type="linelist", default=[],
                  help="directories (relative to rootdir) searched for plugins and imports, as `verimim -I DIR`")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "verimim_phase(name, ...): a property test of the verimim phase NAME (of each NAME) "
        "(the fixture `verimim_phase_name` returns NAME)")
    _collect_verimim_paths(config)


def _collect_verimim_paths(config: pytest.Config) -> None:
    """Every directory of `verimim_paths` exists, and a run of the project's tests collects it.
    A plain `pytest` (arguments from `testpaths`, or none at the rootdir) collects these
    directories too, even when `testpaths` does not cover them: otherwise a failing program
    would go unrun and the run be green. Named arguments, or a run from a subdirectory, choose
    what to run, as pytest's own rules say."""
    roots = _roots(config)
    for name, root in zip(config.getini("verimim_paths"), roots):
        if not root.exists():
            raise pytest.UsageError(f"verimim_paths names `{name}` ({root}), which does not exist")
    for name, d in zip(config.getini("verimim_include"), _include(config)):
        if not Path(d).is_dir():
            raise pytest.UsageError(f"verimim_include names `{name}` ({d}), which is no directory")
    source = config.args_source
    whole = source == pytest.Config.ArgsSource.TESTPATHS or (
        source == pytest.Config.ArgsSource.INVOCATION_DIR and config.invocation_params.dir.resolve() == config.rootpath.resolve())
    if not whole:
        return
    base = config.invocation_params.dir
    covered = [(Path(a) if Path(a).is_absolute() else base / a).resolve() for a in config.args]
    for root in roots:
        if not any(root.is_relative_to(c) for c in covered):
            config.args.append(str(root))
            covered.append(root)


_EXPLICIT = pytest.StashKey[set[Path]]()
_ROOTS = pytest.StashKey[list[Path]]()


def _explicit_paths(config: pytest.Config) -> set[Path]:
    if _EXPLICIT not in config.stash:
        base = config.invocation_params.dir
        paths = set()
        for arg in config.args:
            p = Path(arg.split("::", 1)[0])
            paths.add((p if p.is_absolute() else base / p).resolve())
        config.stash[_EXPLICIT] = paths
    return config.stash[_EXPLICIT]


def _roots(config: pytest.Config) -> list[Path]:
    if _ROOTS not in config.stash:
        config.stash[_ROOTS] = [(config.rootpath / d).resolve() for d in config.getini("verimim_paths")]
    return config.stash[_ROOTS]


_INCLUDE = pytest.StashKey[list[str]]()


def _include(config: pytest.Config) -> list[str]:
    """The `-I` directories of every command the plugin runs (`verimim_include`): a program that
    imports a module of its own is testable."""
    if _INCLUDE not in config.stash:
        config.stash[_INCLUDE] = [str((config.rootpath / d).resolve()) for d in config.getini("verimim_include")]
    return config.stash[_INCLUDE]


def _include_options(config: pytest.Config) -> list[str]:
    return [w for d in _include(config) for w in ("-I", _shown(Path(d)))]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> MimFile | None:
    if file_path.suffix != ".mim":
        return None
    path = file_path.resolve()
    config = parent.config
    if path in _explicit_paths(config) or any(path.is_relative_to(r) for r in _roots(config)):
        return MimFile.from_parent(parent, path=file_path)
    return None


class MimFile(pytest.File):
    """One `.mim` program; its items are the aspects its annotations ask for."""

    def collect(self) -> Iterator[pytest.Item]:
        # The front end reports a bad byte at its place (E-PARSE); the annotations are read past it.
        self.ann = Annotations.parse(self.path.read_bytes().decode("utf-8", errors="replace"))
        self._check_report: driver.Report | None = None
        if self.ann.problems:
            yield MimAnnotationsItem.from_parent(self, name="annotations")
            return
        for name, cls in self.aspects():
            yield cls.from_parent(self, name=name)

    def aspects(self) -> list[tuple[str, type[MimItem]]]:
        error = self.ann.get("EXPECT-ERROR")
        out: list[tuple[str, type[MimItem]]] = [("check", MimCheckItem)]
        if error is not None:
            # A front-end code never runs; a phase code runs only when `check` does not report
            # it (then it is a run-time error, as E-ADDR-SPACE of host code reading device
            # memory: MimRunItem skips otherwise); every other code is a run-time one.
            if error not in FRONTEND_CODES:
                out.append(("run[interp]", MimRunItem))
        elif self.ann.get("EXPECT") is not None:
            out += [("run[interp]", MimRunItem), ("run[gpu]", MimGpuItem)]
        if self.ann.has_checks:
            out.append(("filecheck", MimFileCheckItem))
        return out

    def check_report(self) -> driver.Report:
        """`verimim check` of this file, computed once for all of its items."""
        if self._check_report is None:
            self._check_report = driver.check(str(self.path), _include(self.config))
        return self._check_report

    def phase_code_checked(self) -> bool | None:
        """For a file expecting a phase code: True when check reports it first; None when check
        accepts the program but runs no phases at all (`report.data["phases"] == []`, as before
        the phases existed), so a phase rejection cannot be told from a run-time error."""
        report = self.check_report()
        first = _first_error(report)
        if first is not None and first.code == self.ann.get("EXPECT-ERROR"):
            return True
        if report.ok and report.data.get("phases") == []:
            return None
        return False


class MimItem(pytest.Item):
    parent: MimFile

    @property
    def ann(self) -> Annotations:
        return self.parent.ann

    def runtest(self) -> None:
        raise NotImplementedError

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, MimTestFailure):
            return MimFailureRepr(str(excinfo.value), excinfo.value.summary, self.path)
        return super().repr_failure(excinfo, style=style)  # type: ignore[arg-type]

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # The node id reads `dir/file.mim::run[interp]`; the domain is the aspect (pytest's
        # verbose line is the node id only while the domain is its tail). A failure's first line
        # is the command, with the file as the working directory names it.
        return self.path, None, self.name


class MimAnnotationsItem(MimItem):
    """A file whose annotations are malformed, misspelt or contradict each other: one failing
    item naming every problem, instead of tests that would check something else."""

    def runtest(self) -> None:
        raise MimAnnotationError(f"{self.path}: its annotations are wrong\n"
                                 + "\n".join(f"  {p}" for p in self.ann.problems),
                                 "its annotations are wrong: " + "; ".join(self.ann.problems))


# Codes `check`'s kernel verification reports for every input (issue 12); host-side stream
# races are among them (`E-RACE`).
KERNEL_CODES = frozenset({"E-RACE", "E-BARRIER-DIVERGENCE"})


class MimCheckItem(MimItem):
    def runtest(self) -> None:
        report = self.parent.check_report()
        code = self.ann.get("EXPECT-ERROR")
        what = driver.shell_command(["verimim", "check", _shown(self.path), *_include_options(self.config)])
        if code in PHASE_CODES:
            state = self.parent.phase_code_checked()
            if state is None:
                # `driver.check` ran no phases (report.data["phases"] == []), so a phase
                # rejection cannot be seen: expected to fail until it does (not strict: for a
                # run-time error `run[interp]` is the item that matters).
                pytest.xfail(NO_PHASES_REASON)
            if state:  # a phase rejection
                _expect_error(what, report, code, self.ann.loc, self.path)
            elif not report.ok:
                first = _first_error(report)
                _fail(what, f"error {code} (a phase rejection), or acceptance (and {code} at run time)",
                      f"error {first.code}" if first is not None else f"exit code {report.exit_code}", report)
            return
        if code in FRONTEND_CODES:
            _expect_error(what, report, code, self.ann.loc, self.path)
        elif code in KERNEL_CODES:
            # A race or barrier divergence in a kernel: `check` proves kernels for all inputs,
            # so it must refute it statically (the location may differ from the run's: the
            # verifier names one of the two accesses).
            _expect_error(what, report, code, None)
        elif not report.ok:
            # A run-time code, or none: the program is accepted, or `check` reports that code
            # alone (a stream used after its deinit, which check finds on main's paths).
            errors = {d.code for d in report.diagnostics if d.severity == "error"}
            if code is None or errors != {code}:
                _fail(what, "the program is accepted" + (f", or error {code}" if code else ""),
                      f"exit code {report.exit_code}", report)
        races = self.ann.get("KERNEL-RACES")
        if races is not None:
            _expect_race_status(what, report, races)


def _expect_race_status(what: str, report: driver.Report, status: str) -> None:
    """`// KERNEL-RACES: STATUS`: every kernel launch `check` verified has that races status (a
    file saying `unknown` documents that freedom from races rests on what the model does not
    track; `proved` there would mean the annotation is stale)."""
    kernels = report.data.get("kernels") or []
    found = [str(k.get("races")) for k in kernels if isinstance(k, dict)]
    if not found:
        _fail(what, f"kernel launches whose races are {status}", "no kernel launch in check's report", report)
    if any(f != status for f in found):
        _fail(what, f"races {status} for every kernel launch", "races " + ", ".join(found), report)


class MimRunItem(MimItem):
    target = "interp"

    def run_program(self) -> tuple[driver.Report, str]:
        """`verimim run` of the file with its annotations, and the command that does it."""
        report = driver.run(str(self.path), _include(self.config), self.ann.args, fuel=self.ann.fuel,
                            target=self.target)
        fuel = ["--fuel", str(self.ann.fuel)] if self.ann.fuel is not None else []
        target = ["--target", self.target]  # (without it, run picks the GPU where there is one)
        # options first, then `--`: an argument such as `-v` reaches main, as it did here
        args = ["--", *self.ann.args] if self.ann.args else []
        return report, driver.shell_command(["verimim", "run", _shown(self.path), *_include_options(self.config),
                                             *fuel, *target, *args])

    def runtest(self) -> None:
        code = self.ann.get("EXPECT-ERROR")
        state = self.parent.phase_code_checked() if code in PHASE_CODES else False
        if state:
            pytest.skip(f"check rejects the program with {code} (the `check` item tests it): it never runs")
        report, what = self.run_program()
        if code is not None:
            if code in PHASE_CODES and state is None and not any(d.code == code for d in report.diagnostics):
                pytest.xfail(f"{code} is not reported at run time: a phase rejection? {NO_PHASES_REASON}")
            _expect_error(what, report, code, self.ann.loc, self.path)
            return
        expected = self.ann.get("EXPECT")
        if not report.ok:
            _fail(what, f"success, result {expected}", f"exit code {report.exit_code}", report)
        try:
            want = int(expected or "")
        except ValueError:
            raise MimAnnotationError(f"{self.path}: `// EXPECT: {expected}` is not an integer") from None
        got = report.data.get("result")
        if got != want:
            _fail(what, f"result {want}", f"result {got}", report)
        warnings = sorted({d.code for d in report.diagnostics if d.severity == "warning"})
        if warnings != sorted(set(self.ann.warnings)):
            _fail(what, "warnings " + (", ".join(sorted(set(self.ann.warnings))) or "none"),
                  "warnings " + (", ".join(warnings) or "none"), report)
        if self.ann.loc is not None and self.ann.warnings:
            _expect_error(what, report, self.ann.warnings[0], self.ann.loc, self.path)


class MimGpuItem(MimRunItem):
    """The program compiled (host code JIT-compiled, kernels as PTX) and run on the GPU: the
    same result and warnings as `// EXPECT:` says. Skipped where no CUDA device is found."""

    target = "gpu"

    def runtest(self) -> None:
        from verimim.runtime.cuda import device_available

        if not device_available():
            pytest.skip("no CUDA device (cuda-python, an NVIDIA driver and a GPU are needed)")
        code = self.ann.get("EXPECT-GPU-ERROR")
        if code is None:
            super().runtest()
            return
        # A limit of the GPU backend, stated: the run must stop with it, not give a result or
        # another error (the interpreter's result is run[interp]'s)
        report, what = self.run_program()
        _expect_error(what, report, code, None, self.path)


class MimFileCheckItem(MimItem):
    def runtest(self) -> None:
        phase = self.ann.get("CHECK-AFTER") or None
        what = driver.shell_command(["verimim", "dump", *(["--after", phase] if phase else []), _shown(self.path),
                                     *_include_options(self.config)])
        report = driver.dump(str(self.path), _include(self.config), after=phase)
        if not report.ok or report.text is None:
            _fail(what, "a dump", f"exit code {report.exit_code}", report)
        ok, output = run_filecheck(self.path, report.text or "")
        if not ok:
            raise MimTestFailure(f"{what} does not match its CHECK lines:\n"
                                 f"{output.rstrip()}\n--- the dump ---\n{report.text}",
                                 _filecheck_summary(output))


def _filecheck_summary(output: str) -> str:
    """FileCheck's first complaint without its file name: `CHECK line 3: Couldn't match "x".`"""
    first = re.search(r"^.*?:(\d+): error: (.*)$", output, re.MULTILINE)
    if first is None:
        return "the dump does not match its CHECK lines"
    return f"the dump does not match CHECK line {first.group(1)}: {first.group(2)}"


def run_filecheck(check_file: Path, text: str) -> tuple[bool, str]:
    """Match `text` against the CHECK lines of `check_file` (`filecheck CHECK_FILE < text`)."""
    try:  # the filecheck package's matcher, in process
        from filecheck.finput import FInput
        from filecheck.matcher import Matcher
        from filecheck.options import Options
        from filecheck.parser import Parser
    except ImportError:
        return _run_filecheck_cli(check_file, text)
    opts = Options(match_filename=str(check_file), input_file="-")
    buf = io.StringIO()
    with redirect_stderr(buf), redirect_stdout(buf):
        matcher = Matcher(opts, FInput("<verimim dump>", FInput.canonicalize_line_ends(text)), Parser.from_opts(opts))
        matcher.stderr = buf
        rc = matcher.run()
    return rc == 0, buf.getvalue()


def _run_filecheck_cli(check_file: Path, text: str) -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, "-m", "filecheck", str(check_file)], input=text,
                          capture_output=True, text=True, encoding="utf-8")
    return proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="session")
def mim_world() -> Callable[..., Any]:
    """A factory: `mim_world(text, include=()) -> (World, Unit)` elaborates Mim source text.
    Session-scoped (it holds no state), so Hypothesis's `@given` tests may use it."""
    from verimim.frontend.loader import load_text

    def make(text: str, *, include: tuple[str, ...] | list[str] = (), path: str = "<text>") -> Any:
        return driver.run_with_big_stack(lambda: load_text(text, path, [str(d) for d in include]))

    return make


def _marked_phase(node: Any) -> str:
    """The phase of a test's `@pytest.mark.verimim_phase(NAME)`: NAME as the CLI reads it (an
    upstream alias or a name without its plugin resolved to the phase's annex name), which must
    be one of verimim's phases; a null phase or one verimim leaves unimplemented has no
    behaviour a property could test. (A test marked for several phases is parametrized by them:
    pytest_generate_tests.)"""
    names = _marker_names(node)
    if not names:
        pytest.fail("the fixture verimim_phase_name needs @pytest.mark.verimim_phase(NAME)", pytrace=False)
    return _phase_named(node, names[0])


def _phase_named(node: Any, name: object) -> str:
    """The phase a `@pytest.mark.verimim_phase(NAME)` of the test names (see _marked_phase)."""
    from verimim.phases.pipeline import PHASES
    from verimim.phases.vocabulary import is_known, resolve, unknown_phase

    name_of_test = getattr(node, "originalname", None) or getattr(node, "name", None)  # without its parameters
    test = f"`{name_of_test}`: " if name_of_test else ""
    if not isinstance(name, str):
        pytest.fail(f"{test}@pytest.mark.verimim_phase takes the phase name as a string, not {name!r}",
                    pytrace=False)
    phase = resolve(name)
    if phase in PHASES:
        return phase
    if is_known(name):
        pytest.fail(f"{test}@pytest.mark.verimim_phase: `{name}` is an upstream phase that verimim does "
                    f"not run (it is reported skipped): there is nothing to test", pytrace=False)
    pytest.fail(f"{test}@pytest.mark.verimim_phase: {unknown_phase(name)}", pytrace=False)


def _marker_names(node: Any) -> list[object]:
    """What each of a test's `@pytest.mark.verimim_phase(NAME)` markers says, as written, once
    each (a test marked for two phases is a test of each). The closest level that has any
    decides: a test's own markers override its class's and its module's."""
    out: list[object] = []
    owner: Any = None
    for at, marker in node.iter_markers_with_node("verimim_phase"):
        if owner is not None and at is not owner:
            break
        owner = at
        # `verimim_phase("a.p", "b.q")` marks the test for both (the second was dropped)
        for name in marker.args or (marker.kwargs.get("name"),):
            if name not in out:
                out.append(name)
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A marked test that asks for `verimim_phase_name` gets it as a session-scoped parameter
    (its id: the phase), not from a function-scoped fixture: Hypothesis's `@given` refuses
    function-scoped fixtures. A marker that names no phase verimim runs is the marked test's
    error at setup (pytest_runtest_setup), not a collection error that would stop its
    neighbours in the module; its parameter is then the name as written."""
    markers = _marker_names(metafunc.definition)
    if not markers:
        return  # (the fixture says what is missing when an unmarked test asks for it)
    if "verimim_phase_name" not in metafunc.fixturenames:
        return
    names: list[str] = []
    for marked in markers:
        try:
            name = _phase_named(metafunc.definition, marked)
        except pytest.fail.Exception:  # (its setup says what is wrong)
            name = str(marked)
        if name not in names:
            names.append(name)
    metafunc.parametrize("verimim_phase_name", names, ids=names, scope="session")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Every marked test's phases are checked before it runs (one that does not ask for the
    fixture too: a misspelt phase must not pass unseen)."""
    for name in _marker_names(item):
        _phase_named(item, name)


@pytest.fixture
def verimim_phase_name(request: pytest.FixtureRequest) -> str:
    """The NAME of the test's `@pytest.mark.verimim_phase(NAME)` marker (marked tests get it
    from pytest_generate_tests; this fixture is what an unmarked test reaches)."""
    return _marked_phase(request.node)
