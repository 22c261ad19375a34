"""Reading a program from disk the way a user expects, and keeping imports inside their folders.

- a UTF-8 byte-order mark (which editors on Windows write) is accepted and dropped;
- bytes that are not UTF-8 are `E-PARSE` at the line and column (in characters) of the first bad
  byte, never a byte offset;
- `plugin X;` / `import X;` resolve only to files whose real path (symbolic links resolved) lies
  inside the search directory they were found in: a link inside an `-I` folder that points
  outside it is `E-IMPORT`, and nothing outside is read.

`SourceLoader` is the front end's Loader with these two rules; `load_source` is
`loader.load_program` with it.
"""
from __future__ import annotations

import os
from pathlib import Path

from verimim.diagnostics import ImportError_, Loc, ParseError, UsageError
from verimim.frontend.loader import Loader, Unit, _record_pipeline
from verimim.ir.world import World

BOM = b"\xef\xbb\xbf"


def decode_source(data: bytes, path: str) -> str:
    """The text of a source file's bytes: UTF-8, an optional byte-order mark dropped."""
    data = data.removeprefix(BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        line_start = data.rfind(b"\n", 0, e.start) + 1
        col = len(data[line_start:e.start].decode("utf-8", errors="replace")) + 1
        raise ParseError(f"the file is not UTF-8: byte 0x{data[e.start]:02x} {e.reason}",
                         Loc(path, line, col)) from None


# The text of each program file this process read, for the source lines of its diagnostics
# (verimim.render): read once — a FIFO or `/dev/stdin` has nothing left for a second read,
# which blocked until a writer came.
_TEXTS_READ: dict[str, str] = {}


# The largest program file read (a device like /dev/zero, or a stray binary, was read for ever).
MAX_SOURCE_BYTES = 64 << 20


def read_source(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        raise UsageError(f"cannot read `{path}`: {e.strerror or e}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise UsageError(f"cannot read `{path}`: larger than {MAX_SOURCE_BYTES >> 20} MiB, more than verimim "
                         f"reads as a program")
    text = decode_source(data, path)
    _TEXTS_READ[path] = text
    return text


def text_read(path: str) -> str | None:
    """The text `read_source` read from `path`, if it did."""
    return _TEXTS_READ.get(path)


def inside(path: Path, directory: Path) -> bool:
    """Whether `path`, symbolic links resolved, lies in `directory` (also resolved)."""
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([real, root]) == root


class SourceLoader(Loader):
    """The front end's Loader, reading the program with `read_source` and refusing imports that
    resolve outside the directory they were found in."""

    def find(self, name: str, loc: Loc, what: str = "plugin") -> Path:
        found = super().find(name, loc, what)
        if not inside(found, found.parent):
            raise ImportError_(f"{what} `{name}` resolves to `{os.path.realpath(found)}`, outside the "
                               f"search directory `{found.parent}` (a symbolic link): not read", loc)
        # The base Loader decodes an imported file strictly; a bad byte is reported here, at its
        # line:col in that file, instead of surfacing as an internal decoding error.
        try:
            decode_source(found.read_bytes(), str(found))
        except OSError as e:
            raise ImportError_(f"plugin `{name}`: cannot read `{found}`: {e.strerror or e}", loc) from None
        return found

    def load_file(self, path: str) -> Unit:
        return self.elaborate(read_source(path), path, plugin=None)


def load_source(path: str, include_dirs: list[str] | None = None) -> tuple[World, Unit]:
    world = World()
    loader = SourceLoader(world, [Path(d) for d in include_dirs or []])
    unit = loader.load_file(path)
    _record_pipeline(world, unit)
    return world, unit
