"""`verimim check --emit-smt2 DIR` writes every Z3 query as SMT-LIB 2 with the answer Z3 gave
(`(set-info :status …)`), and the `z3` command-line solver gives the same answer on each file."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from verimim import driver

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [ROOT / "tests" / "programs" / "valid" / n for n in
            ("with_streams_two.mim", "shared_reduce_barrier.mim", "btensor_matmul.mim", "buffer_rank2_fun.mim")]
Z3 = shutil.which("z3")


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_emitted_queries_recheck_with_the_z3_command(path: Path, tmp_path: Path) -> None:
    report = driver.check(str(path), [], emit_smt2=str(tmp_path))
    assert report.ok, [d.render() for d in report.diagnostics]
    files = sorted(tmp_path.glob("*.smt2"))
    assert files, "every proved phase asked Z3 at least one query"
    if Z3 is None:
        pytest.skip("no `z3` command on PATH (the z3-solver package installs one)")
    for f in files:
        text = f.read_text()
        status = re.search(r"\(set-info :status (sat|unsat)\)", text)
        assert status, f"{f.name}: no answer recorded"
        out = subprocess.run([Z3, "-T:60", str(f)], capture_output=True, text=True, timeout=120).stdout.split()
        assert out and out[0] == status.group(1), f"{f.name}: z3 says {out[:1]}, the in-process solver {status.group(1)}"
