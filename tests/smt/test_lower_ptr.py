"""`buffer.lower_ptr` and its specification: the lowering keeps the interpreter's result on
buffers of rank 1, 2 and 3 (before split_apply on the whole program, and in the host
sub-pipeline after it), the specification proves it, and deliberately wrong lowerings are each
refuted with a counterexample (PHASES.md: a specification that cannot fail is a defect)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import PROGRAMS
from verimim import driver
from verimim.driver import load, run_with_big_stack
from verimim.interp.machine import Machine, find_main
from verimim.ir.defs import App, Axiom, Def
from verimim.ir.world import World
from verimim.layout import X86_64, layout_of
from verimim.phases.base import PhaseResult, Program, walk
from verimim.phases.lower_ptr import LowerPtr, _LowerPtr, dims_of
from verimim.phases.pipeline import PHASES, default_pipeline, run_on_side
from verimim.phases.rewriter import Rewriter
from verimim.phases.runner import run_pipeline
from verimim.smt.solver import Outcome, SpecContext
from verimim.smt.specs import SPECS, check_spec

VALID = PROGRAMS / "valid"
BUFFER_PROGRAMS = ["buffer_rank1_launch.mim", "buffer_rank2_fun.mim", "buffer_square_index.mim",
                   "buffer_roundtrip.mim"]
HOST_PHASES = ["gpu.host_malloc2gpualloc_repl", "buffer.lower_ptr"]

HEADER = """plugin core;
plugin mem;
plugin buffer;

"""
MAIN = "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =\n"

# Host-only programs (no kernel: the whole program is host code), with main's result for argc = 1.
HOST_PROGRAMS: dict[str, tuple[str, int]] = {
    # rank 1: alloc, write in a loop bounded by shape, read, init, copy, lit.
    "rank1_ops": (MAIN + """
    let (m0, b) = buffer.alloc (1, 5, I32) m0;
    let n = buffer.shape (1, 5, I32) (b, 0_1);
    fill (m0, b, 0)
    where
        con fill (m0: mem.M 0, b: buffer.Buf (1, 5, I32), i: Nat) =
            (sum, body)#(core.ncmp.l (i, n)) (m0, b)
            where
                con body (m0: mem.M 0, b: buffer.Buf (1, 5, I32)) =
                    let (m0, b) = buffer.write (1, 5, I32) (m0, b, core.bitcast (Idx 5) i, core.bitcast I32 (core.nat.mul (i, i)));
                    fill (m0, b, core.nat.add (i, 1));
            end;
        con sum (m0: mem.M 0, b: buffer.Buf (1, 5, I32)) =
            let (m0, a) = buffer.init (1, 5, I32) (m0, (1I32, 1I32, 2I32, 3I32, argc));
            let m0 = buffer.copy (1, 5, I32) (m0, a, b);
            let (m0, c) = buffer.lit (1, 5, I32) (m0, 100I32);
            let (m0, x) = buffer.read (1, 5, I32) (m0, a, 4_5);
            let (m0, y) = buffer.read (1, 5, I32) (m0, a, core.bitcast (Idx 5) argc);
            let (m0, z) = buffer.read (1, 5, I32) (m0, c, 2_5);
            return (m0, core.wrap.add 0 (core.wrap.add 0 (x, y), z));
    end;
""", 16 + 1 + 100),
    # rank 2, not square: row-major order is observable; a buffer passed to a function.
    "rank2_fun": ("""fun at (m0: mem.M 0, b: buffer.Buf (2, (2, 3), I32), i: Idx 2, j: Idx 3): [mem.M 0, I32] =
    let (m0, v) = buffer.read (2, (2, 3), I32) (m0, b, (i, j));
    let rows = buffer.shape (2, (2, 3), I32) (b, 0_2);
    let cols = buffer.shape (2, (2, 3), I32) (b, 1_2);
    return (m0, core.wrap.add 0 (v, core.bitcast I32 (core.nat.mul (rows, cols))));

""" + MAIN + """
    let (m0, b) = buffer.init (2, (2, 3), I32) (m0, ((1I32, 2I32, 3I32), (4I32, 5I32, 6I32)));
    let (m0, b) = buffer.write (2, (2, 3), I32) (m0, b, (0_2, core.bitcast (Idx 3) argc), 50I32);
    ret (m0, x) = at $ (m0, b, 1_2, core.bitcast (Idx 3) argc);
    ret (m0, y) = at $ (m0, b, 0_2, 1_3);
    let (m0, c) = buffer.alloc (2, (2, 3), I32) m0;
    let m0 = buffer.copy (2, (2, 3), I32) (m0, c, b);
    let (m0, z) = buffer.read (2, (2, 3), I32) (m0, c, (1_2, 2_3));
    return (m0, core.wrap.add 0 (core.wrap.add 0 (x, y), z));
""", (5 + 6) + (50 + 6) + 6),
    # rank 3 and a dimension of size 1 (`«1; X»` is X: no lea for it); a generic function over
    # the shape; a buffer beside a pointer of its lowered type (two old types, one new type).
    "rank3_generic": ("""fun get (n: Nat) (m0: mem.M 0, b: buffer.Buf (1, n, I32), i: Idx n): [mem.M 0, I32] =
    let (m0, v) = buffer.read (1, n, I32) (m0, b, i);
    let (m0, b) = buffer.write (1, n, I32) (m0, b, i, core.wrap.add 0 (v, 1I32));
    let (m0, w) = buffer.read (1, n, I32) (m0, b, i);
    return (m0, core.wrap.add 0 (w, core.bitcast I32 (buffer.shape (1, n, I32) (b, 0_1))));

""" + MAIN + """
    let (m0, b) = buffer.lit (1, 4, I32) (m0, 7I32);
    let (m0, p) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, p, ‹4; 2I32›);
    let (m0, c) = buffer.lit (2, (1, 3), I32) (m0, argc);
    let (m0, c) = buffer.write (2, (1, 3), I32) (m0, c, (0_1, 2_3), 40I32);
    let (m0, d) = buffer.init (3, (2, 2, 3), I32) (m0, ‹i: 2; ‹j: 2; ‹k: 3; core.bitcast I32 (core.nat.add (core.nat.mul (6, core.bitcast Nat i), core.nat.add (core.nat.mul (3, core.bitcast Nat j), core.bitcast Nat k)))›››);
    let (m0, z) = buffer.read (3, (2, 2, 3), I32) (m0, d, (1_2, 0_2, 2_3));
    let (m0, y) = buffer.read (2, (1, 3), I32) (m0, c, (0_1, 2_3));
    let (m0, x) = buffer.read (2, (1, 3), I32) (m0, c, (0_1, 1_3));
    ret (m0, g) = get 4 $ (m0, b, 3_4);
    both (m0, b, p)
    where
        con both (m0: mem.M 0, b: buffer.Buf (1, 4, I32), p: mem.Ptr0 «4; I32») =
            let (m0, u) = buffer.read (1, 4, I32) (m0, b, 0_4);
            let (m0, v) = mem.load (m0, mem.lea (p, 1_4));
            let m0 = mem.free (m0, p);
            return (m0, core.wrap.add 0 (core.wrap.add 0 (core.wrap.add 0 (core.wrap.add 0 (g, y), x), z),
                                         core.wrap.add 0 (u, v)));
    end;
""", (7 + 1 + 4) + 40 + 1 + 8 + (7 + 2)),
    # a square shape with a run-time index in both positions (and on the diagonal).
    "square": (MAIN + """
    let k = core.bitcast (Idx 3) argc;
    let (m0, b) = buffer.init (2, (3, 3), I32) (m0, ‹i: 3; ‹j: 3; core.bitcast I32 (core.nat.add (core.nat.mul (10, core.bitcast Nat i), core.bitcast Nat j))››);
    let (m0, b) = buffer.write (2, (3, 3), I32) (m0, b, (k, k), 7I32);
    let (m0, x) = buffer.read (2, (3, 3), I32) (m0, b, (k, 2_3));
    let (m0, y) = buffer.read (2, (3, 3), I32) (m0, b, (2_3, k));
    let (m0, z) = buffer.read (2, (3, 3), I32) (m0, b, (k, k));
    return (m0, core.wrap.add 0 (core.wrap.add 0 (core.wrap.mul 0 (x, 100I32), y), z));
""", 12 * 100 + 21 + 7),
}


def load_text(tmp_path: Path, name: str, text: str) -> World:
    path = tmp_path / f"{name}.mim"
    path.write_text(HEADER + text, encoding="utf-8")
    world, _ = run_with_big_stack(lambda: load(str(path), []))
    return world


def result(prog: Program, args: list[str] | None = None) -> tuple[int, list[str]]:
    def go() -> tuple[int, list[str]]:
        m = Machine(prog.host, device=prog.device)
        value = m.run_main(find_main(prog.host), args or ["prog"])
        return value, sorted(d.code for d in m.warnings)
    return run_with_big_stack(go)


def apply(phase: LowerPtr, prog: Program, side: str | None = None) -> PhaseResult:
    return run_with_big_stack(lambda: run_on_side(phase, prog, side) if side else phase.apply(prog))


def verdict(res: PhaseResult) -> Outcome:
    return run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=10_000)))


def split_program(path: Path) -> Program:
    """The program as the host sub-pipeline receives it (after split_apply)."""
    def go() -> Program:
        world, _ = load(str(path), [])
        run = run_pipeline(world, verify=False, until="gpu.split_apply")
        assert not run.stopped, run.diagnostics
        assert run.program.device is not None
        return run.program
    return run_with_big_stack(go)


def buffer_axioms(prog: Program) -> list[str]:
    """The buffer layer's annexes (`buffer.ptr_copy`, on pointers, is what the phase makes of `copy`)."""
    return sorted({d.annex for w in prog.worlds() for d in walk(w) if isinstance(d, Axiom)
                   and (d.annex.startswith("buffer.") or d.annex.startswith("gpu.buf_"))
                   and d.annex != "buffer.ptr_copy"})


# ----------------------------------------------------------------------------- registration

def test_registered_with_its_specification_but_not_in_the_default_pipeline() -> None:
    assert isinstance(PHASES["buffer.lower_ptr"], LowerPtr)
    assert "buffer.lower_ptr" in SPECS
    assert "buffer.lower_ptr" not in default_pipeline()


# ----------------------------------------------------------------------------- the right phase

@pytest.mark.parametrize("name", sorted(HOST_PROGRAMS))
def test_host_programs_lowered_before_split_keep_their_result(tmp_path: Path, name: str) -> None:
    text, expected = HOST_PROGRAMS[name]
    prog = Program(load_text(tmp_path, name, text))
    res = apply(LowerPtr(), prog)
    assert not res.rejected and res.skipped is None, [d.render() for d in res.diagnostics]
    assert buffer_axioms(prog) and not buffer_axioms(res.after)
    before, after = result(prog), result(res.after)
    assert before[0] == expected
    assert after == before
    out = verdict(res)
    assert out.status == "proved", out.detail


@pytest.mark.parametrize("name", BUFFER_PROGRAMS)
def test_programs_lowered_in_the_host_sub_pipeline(name: str) -> None:
    path = VALID / name
    ann = conftest.annotations(path)
    args = [str(path), *ann.get("ARGS", "").split()]
    prog = split_program(path)
    res = apply(LowerPtr(), prog, "host")
    assert not res.rejected and res.skipped is None
    assert not buffer_axioms(res.after)
    assert res.after.device is prog.device  # the kernels hold no buffer: untouched
    assert result(prog, args)[0] == result(res.after, args)[0] == int(ann["EXPECT"])
    out = verdict(res)
    assert out.status == "proved", out.detail


def test_lowered_shapes_and_chains(tmp_path: Path) -> None:
    """The pointee is the nested row-major array; a read of a rank-2 buffer is two leas, the
    outer one by the first index; a dimension of size 1 has no lea."""
    prog = Program(load_text(tmp_path, "rank3_generic", HOST_PROGRAMS["rank3_generic"][0]))
    res = apply(LowerPtr(), prog)
    w = res.after.host
    loads = [d for d in walk(w) if isinstance(d, App) and isinstance(d.head, Axiom)
             and d.head.annex == "mem.load" and d.depth == 2]
    depths = sorted(_lea_depth(d.arg.ops[1]) for d in loads)  # type: ignore[attr-defined]
    # get (rank 1) twice, c (rank 2 of shape (1, 3)) twice, d (rank 3) once, both's b once, p once.
    assert depths == [1, 1, 1, 1, 1, 1, 3]
    mallocs = {d.arg.ops[1].value for d in walk(w) if isinstance(d, App)  # type: ignore[attr-defined]
               and isinstance(d.head, Axiom) and d.head.annex == "mem.malloc" and d.depth == 2}
    assert mallocs == {16, 12, 48}


def _lea_depth(p: Def) -> int:
    n = 0
    while isinstance(p, App) and isinstance(p.head, Axiom) and p.head.annex == "mem.lea":
        n += 1
        p = p.arg.ops[0]  # type: ignore[attr-defined]
    return n


def test_skipped_without_buffers() -> None:
    world, _ = run_with_big_stack(lambda: load(str(VALID / "nested_tuples.mim"), []))
    res = apply(LowerPtr(), Program(world))
    assert res.skipped == "the program uses no buffer"
    assert res.after.host is world


def test_unsupported_access_is_rejected(tmp_path: Path) -> None:
    """A shape known only as a whole (`s: «2; Nat»`) has no nested array to step through."""
    text = """fun get2 (s: «2; Nat») (m0: mem.M 0, b: buffer.Buf (2, s, I32), i: Idx s#0_2, j: Idx s#1_2): [mem.M 0, I32] =
    let (m0, v) = buffer.read (2, s, I32) (m0, b, (i, j));
    return (m0, v);

""" + MAIN + """
    let (m0, b) = buffer.lit (2, (2, 3), I32) (m0, 7I32);
    ret (m0, g) = get2 (2, 3) $ (m0, b, 1_2, 2_3);
    return (m0, g);
"""
    res = apply(LowerPtr(), Program(load_text(tmp_path, "sym2", text)))
    assert res.rejected
    d = res.diagnostics[0]
    assert d.code == "E-UNSUPPORTED" and d.loc is not None and (d.loc.line, d.loc.col) == (6, 19)  # the read


def test_kernel_taking_a_buffer_is_rejected_in_the_host_sub_pipeline(tmp_path: Path) -> None:
    """The host sub-pipeline sees only the kernel's declaration: lowering its type there would
    split the kernel's type between the two Worlds."""
    text = """plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM, group_id: Idx 1, item_id: Idx 1,
            (), b: buffer.Buf (1, 4, I32), return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    return (m1, m3, m4, m5);

""" + MAIN + """
    let (m0, m1, m4) = gpu.init m0;
    let (m0, b) = buffer.lit (1, 4, I32) (m0, 7I32);
    ret (m0, m1, m4) = gpu.launch (1, 1, gpu.default_stream, ff, ()) kernel b $ (m0, m1, m4);
    let m0 = gpu.deinit (m0, m1, m4);
    let (m0, v) = buffer.read (1, 4, I32) (m0, b, 0_4);
    return (m0, v);
"""
    path = tmp_path / "kernel_buf.mim"
    path.write_text(HEADER + text, encoding="utf-8")
    res = apply(LowerPtr(), split_program(path), "host")
    assert res.rejected
    d = res.diagnostics[0]
    assert d.code == "E-UNSUPPORTED" and "kernel" in d.message and d.loc is not None and d.loc.line == 7


COPY_OF_A_PARTLY_WRITTEN_BUFFER = MAIN + """
    let (m0, a) = buffer.alloc (1, 4, I32) m0;
    let (m0, a) = buffer.write (1, 4, I32) (m0, a, 0_4, 5I32);
    let (m0, b) = buffer.alloc (1, 4, I32) m0;
    let m0 = buffer.copy (1, 4, I32) (m0, b, a);
    let (m0, x) = buffer.read (1, 4, I32) (m0, b, 0_4);
    return (m0, x);
"""


def test_copy_of_a_partly_written_buffer_is_lowered_and_proved(tmp_path: Path) -> None:
    """`buffer.copy` moves the "initialised" shadow with the bytes: it becomes `buffer.ptr_copy`,
    which does too. Its lowering to a `mem.load` of the whole source and a `mem.store` faulted on
    the first unwritten byte (E-UNINIT after the phase; check said E-SPEC on a valid program)."""
    prog = Program(load_text(tmp_path, "copy_uninit", COPY_OF_A_PARTLY_WRITTEN_BUFFER))
    res = apply(LowerPtr(), prog)
    assert result(res.after) == result(prog) == (5, ["W-LEAK", "W-LEAK"])
    out = verdict(res)
    assert out.status == "proved", out.detail


class _CopyByLoadAndStore(_LowerPtr):
    """The old lowering of `buffer.copy`: a `mem.load` of the whole source, a `mem.store` of it."""

    def copy(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        m, dst, src = (w.extract_n(arg, 3, k) for k in range(3))
        a = self.array(s, t)
        ld = self.mem_op("mem.load", a, w.tuple([m, src]))
        return self.mem_op("mem.store", a, w.tuple([w.extract_n(ld, 2, 0), dst, w.extract_n(ld, 2, 1)]))


def test_copy_by_load_and_store_refuted(tmp_path: Path) -> None:
    prog = Program(load_text(tmp_path, "copy_uninit", COPY_OF_A_PARTLY_WRITTEN_BUFFER))
    res = apply(variant(_CopyByLoadAndStore), prog)
    out = verdict(res)
    assert out.status == "refuted" and "buffer.ptr_copy" in out.detail, out.detail


@pytest.mark.parametrize("name", BUFFER_PROGRAMS[:3])
def test_check_with_host_phases(name: str) -> None:
    """`verimim check FILE --host-phases gpu.host_malloc2gpualloc_repl,buffer.lower_ptr`."""
    report = driver.check(str(VALID / name), [], host_phases=HOST_PHASES)
    assert report.ok, [d.render() for d in report.diagnostics]
    entry = next(p for p in report.data["phases"] if p["name"] == "buffer.lower_ptr")
    assert entry["status"] == "proved" and entry["side"] == "host", entry


# ----------------------------------------------------------------------------- wrong variants

class _ColumnMajor(_LowerPtr):
    """Steps through the dimensions with the index parts in reverse order."""

    def chain(self, old: App, p: Def, r: Def, s: Def, t: Def, idx: Def) -> Def | None:
        w = self.new
        dims = dims_of(w, r, s)
        if dims is not None and len(dims) > 1:
            idx = w.tuple([w.extract(idx, w.lit_idx(len(dims), k)) for k in reversed(range(len(dims)))])
        return super().chain(old, p, r, s, t, idx)


class _OneElementShort(_LowerPtr):
    """Allocates one element fewer than the array holds."""

    def malloc(self, m: Def, s: Def, t: Def) -> Def:
        w = self.new
        a = self.array(s, t)
        arr_lay, elem_lay = layout_of(a, X86_64), layout_of(t, X86_64)
        assert arr_lay is not None and elem_lay is not None
        size = w.lit_nat(arr_lay.size - elem_lay.size)
        return w.app(w.app(self.annex("mem.malloc"), w.tuple([a, w.lit_nat(0)])), w.tuple([m, size]))


class _ReadLeftBehind(_LowerPtr):
    """Forgets `buffer.read`."""

    def read(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        return None


class _CopyBackwards(_LowerPtr):
    """Copies dst into src."""

    def copy(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        m, dst, src = (w.extract_n(arg, 3, k) for k in range(3))
        return super().copy(old, r, s, t, w.tuple([m, src, dst]))


class _NoCopyToHost(_LowerPtr):
    """Drops `gpu.buf_copy_to_host`: the host never sees the kernel's results."""

    def buf_copy_to_host(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        w = self.new
        return w.tuple([w.extract_n(arg, 4, 0), w.extract_n(arg, 4, 1)])


def variant(rewriter: type[_LowerPtr]) -> LowerPtr:
    """The phase with a wrong rewriter, and without the phase's own check for leftovers (which
    would reject what only the specification must catch)."""
    class Wrong(LowerPtr):
        def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
            return rewriter(world, res)

        @staticmethod
        def check_lowered(world: World, res: PhaseResult) -> None:
            return None
    return Wrong()


def test_column_major_refuted_with_index_counterexample(tmp_path: Path) -> None:
    prog = Program(load_text(tmp_path, "square", HOST_PROGRAMS["square"][0]))
    res = apply(variant(_ColumnMajor), prog)
    assert result(res.after)[0] != HOST_PROGRAMS["square"][1]  # it really is wrong
    out = verdict(res)
    assert out.status == "refuted", out.detail
    cex = out.counterexample
    assert "not equivalent" in out.detail and cex["operation"] in ("buffer.read", "buffer.write")
    assert cex["location"] != "?" and cex["offset before"] != cex["offset after"]
    assert len(cex["index"]) == 2


def test_column_major_refuted_on_a_non_square_buffer() -> None:
    """Not square: the swapped chain steps out of an `Idx n` (an ill-formed lea) — refuted too."""
    prog = split_program(VALID / "buffer_rank2_fun.mim")
    out = verdict(apply(variant(_ColumnMajor), prog, "host"))
    assert out.status == "refuted" and out.counterexample["index"], out.detail


@pytest.mark.parametrize("name", ["rank1_ops", "rank2_fun"])
def test_one_element_short_refuted_with_sizes(tmp_path: Path, name: str) -> None:
    prog = Program(load_text(tmp_path, name, HOST_PROGRAMS[name][0]))
    out = verdict(apply(variant(_OneElementShort), prog))
    assert out.status == "refuted", out.detail
    cex = out.counterexample
    assert cex["operation"] in ("buffer.alloc", "buffer.init", "buffer.lit")
    assert cex["bytes wanted"] - cex["bytes allocated"] == 4  # one I32


def test_read_left_behind_refuted(tmp_path: Path) -> None:
    prog = Program(load_text(tmp_path, "rank1_ops", HOST_PROGRAMS["rank1_ops"][0]))
    assert apply(LowerPtr(), prog).skipped is None
    wrong = apply(variant(_ReadLeftBehind), prog)
    assert not wrong.rejected and wrong.after.host is not prog.host
    out = verdict(wrong)
    assert out.status == "refuted" and "`buffer.read` remains" in out.detail, out.detail
    assert out.counterexample["location"] != "?"


def test_copy_backwards_refuted(tmp_path: Path) -> None:
    prog = Program(load_text(tmp_path, "rank2_fun", HOST_PROGRAMS["rank2_fun"][0]))
    out = verdict(apply(variant(_CopyBackwards), prog))
    assert out.status == "refuted", out.detail
    assert out.counterexample["location"] != "?"


def test_dropped_copy_to_host_refuted() -> None:
    prog = split_program(VALID / "buffer_rank1_launch.mim")
    out = verdict(apply(variant(_NoCopyToHost), prog, "host"))
    assert out.status == "refuted" and "gpu.copy_to_host.block" in out.detail, out.detail


class _ShapePlusOne(_LowerPtr):
    """A rank-1 buffer's extent one too large."""

    def shape(self, old: App, r: Def, s: Def, t: Def, arg: Def) -> Def | None:
        got = super().shape(old, r, s, t, arg)
        assert got is not None
        return self.new.app(self.new.annex("core.nat.add"), self.new.tuple([got, self.new.lit_nat(1)]))


def test_a_sum_the_folded_shape_reorders_is_proved_and_a_wrong_shape_in_it_refuted() -> None:
    """`x + shape …` becomes `1 + x` (reassociated through the sum) once the shape is the literal:
    the right lowering is proved (it was a false E-SPEC), a wrong extent in the same sum refuted."""
    prog = split_program(VALID / "buffer_shape_folded_into_sum.mim")
    right = verdict(apply(LowerPtr(), prog, "host"))
    assert right.status == "proved", right.detail
    wrong = apply(variant(_ShapePlusOne), prog, "host")
    assert result(wrong.after)[0] != result(prog)[0]  # it really is wrong
    out = verdict(wrong)
    assert out.status == "refuted", out.detail
