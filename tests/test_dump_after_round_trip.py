"""`dump --after PHASE` prints Mim that reads back to the same program: dumping the dump gives the
same text (docs/cli.md: "as Mim that parses, checks and runs")."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from verimim import driver


def _dump_of_dump(path: Path, after: str, tmp_path: Path) -> tuple[str, str]:
    first = driver.dump(str(path), [], after=after)
    assert first.ok and first.text, [d.render() for d in first.diagnostics]
    again = tmp_path / "dumped.mim"
    again.write_text(first.text, encoding="utf-8")
    second = driver.dump(str(again), [])
    assert second.ok and second.text, [d.render() for d in second.diagnostics] + [first.text]
    return first.text, second.text


@pytest.mark.parametrize("after", ["gpu.split_apply", "gpu.remove_double_syncs[device]"])
def test_a_dump_after_the_split_is_a_fixed_point(after: str, tmp_path: Path) -> None:
    # The device and the host World were printed by two printers, each numbering its `let`s from
    # 0 in one name space: the host's were renamed (`_0_1`), and read back as one module they
    # were numbered on from the kernels' (`_2`): another text.
    text, again = _dump_of_dump(PROGRAMS / "valid" / "manual_stream.mim", after, tmp_path)
    assert "let _0_1 " not in text
    assert again == text


# `loop`'s filter holds for a literal `i` only: in `For` it is a call. Inlining `For` into `main`
# (compile.beta_red) makes it `loop (mem, 0_123)`: read back without a filter, the front end
# unfolded it (the branch picks its side by the literal condition) and `main` returned at once,
# where the program the phase left runs `loop` as a call (both sides of the branch: for ever).
FILTERED = """plugin core;

lam For {n: Nat} (start: Idx n, _end: Idx n) (mem: %mem.M 0) (it: [%mem.M 0, Idx n] → %mem.M 0): %mem.M 0 =
    lam loop (mem: %mem.M 0, i: Idx n) @(%core.pe.is_closed i) : [%mem.M 0, Idx n] =
        let mem = it (mem, i);
        let j   = %core.wrap.add 0 (i, %core.idx n 0 1);
        ((mem, j), loop (mem, j))#(%core.icmp.ul (i, _end));
    let (mem, _) = loop (mem, start);
    mem;

con extern main [mem: %mem.M 0, return: Cn [%mem.M 0, I32]] =
    let mem = For (0_123, 122_123) mem (λ [mem: %mem.M 0, i: Idx 123]: %mem.M 0 = mem);
    return (mem, 0I32);
"""


def test_a_lam_still_called_after_a_phase_is_printed_with_filter_ff(tmp_path: Path) -> None:
    src = tmp_path / "for_loop.mim"
    src.write_text(FILTERED, encoding="utf-8")
    text, again = _dump_of_dump(src, "compile.beta_red", tmp_path)
    assert "lam loop (mem: mem.M 0, i: Idx 123) @ff:" in text, text
    assert "loop (mem_1, 0_123)" in again  # still a call
    assert again == text
