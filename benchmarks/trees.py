"""Running another revision's verimim beside this tree's (`--against REV` of the benchmarks):
a temporary git worktree, and a tree's own code importable as `verimim` (its top-level
subpackages linked under verimim/, as scripts/gpu_verify.sh links them)."""
from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBPACKAGES = ("runtime", "phases", "smt", "fuzz")  # top-level folders imported as verimim.<sub>


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A checkout of `rev` for the duration of the block."""
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(base), rev], check=True)
        try:
            yield base
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True)


@contextmanager
def importable(tree: Path) -> Iterator[dict[str, str]]:
    """The environment variables that make `tree`'s own code the `verimim` a child imports."""
    import os

    links = [tree / "verimim" / sub for sub in SUBPACKAGES if not (tree / "verimim" / sub).exists()]
    for link in links:
        link.symlink_to(Path("..") / link.name)
    try:
        yield {**os.environ, "PYTHONPATH": str(tree)}
    finally:
        for link in links:
            link.unlink()
