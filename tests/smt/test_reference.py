"""verimim.smt.reference: what the specifications compare with, computed independently of the
phases — LLVM's own layouts, and the kernels by the seed's definition of `gpu.launch`."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from verimim.driver import load
from verimim.ir.world import World
from verimim.layout import NVPTX64, X86_64, layout_of
from verimim.phases.repl import kernels_of
from verimim.phases.runner import run_pipeline
from verimim.smt.reference import abi_layout, kernels


def types(w: World) -> list:
    i8, i16, i32, i64 = (w.idx_n(2 ** b) for b in (8, 16, 32, 64))
    ptr = w.app(w.annex("mem.Ptr"), w.tuple([i32, w.lit_nat(0)]))
    return [w.nat(), w.idx_n(2), w.idx_n(4), i8, i16, i32, i64, ptr,
            w.sigma([i8, i32]), w.sigma([i32, i8]), w.sigma([i8, w.sigma([i16, i64]), i8]),
            w.arr(w.lit_nat(3), i16), w.arr(w.lit_nat(2), w.sigma([i32, i8])), w.sigma([ptr, i8]),
            w.pi(i32, i32), w.sigma([i8, w.cn(w.sigma([i32, w.cn(i32)]))])]  # functions: function pointers


@pytest.mark.parametrize("target,name", [(X86_64, "x86_64"), (NVPTX64, "nvptx64")])
def test_verimim_layouts_agree_with_llvm(target: object, name: str) -> None:
    w, _ = load(str(PROGRAMS / "valid" / "kernel_no_args.mim"), [])
    for t in types(w):
        mine = layout_of(t, target)  # type: ignore[arg-type]
        assert mine is not None
        assert (mine.size, mine.align) == abi_layout(t, name), t


def test_a_type_without_a_fixed_llvm_type_has_no_layout() -> None:
    w = World()
    assert abi_layout(w.arr(w.top(w.nat()), w.idx_n(256))) is None  # «⊤:Nat; I8»: no size


LAUNCHING = [p for p in sorted((PROGRAMS / "valid").glob("*.mim")) if "gpu.launch" in p.read_text()][:12]


@pytest.mark.parametrize("path", LAUNCHING, ids=[p.name for p in LAUNCHING])
def test_kernels_by_the_seed_agree_with_the_phases_before_and_after_split(path: Path) -> None:
    w, _ = load(str(path), [])
    assert kernels(w) == kernels_of(w)
    run = run_pipeline(w, verify=False)
    dev = run.program.device
    if dev is not None:
        assert kernels(dev) == kernels_of(dev) != []
