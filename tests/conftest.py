"""Shared test helpers: where the test programs and the shared examples live."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
SHARED = ROOT.parent / "shared"
EXAMPLES = SHARED / "examples"


def annotations(path: Path) -> dict[str, str]:
    """The `// KEY: value` annotations at the top of a test program."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\s*//\s*([A-Z][A-Z-]*):\s*(.*)$", line)
        if m:
            out.setdefault(m.group(1), m.group(2).strip())
    return out


def shared_examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.mim")) if EXAMPLES.is_dir() else []


def need_shared() -> None:
    if not EXAMPLES.is_dir():
        pytest.skip("../shared/examples is not present")
