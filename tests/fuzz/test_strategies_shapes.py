"""Upstream's program shapes in the generator (issue 10, item 7): each is generated, printed in
upstream's syntax, round-trips, is named in the coverage, and runs through the oracle; the
oracle tells a wrong variant of a shape from the right one."""
from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from verimim.driver import run_with_big_stack
from verimim.fuzz.strategies import check_generated, programs, canonical, reparse
from verimim.plug import c_interp

SETTINGS = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

NEW_SHAPES = {"branch.cont_param", "branch.return_param", "branch.lam_target", "cont.curried",
              "rec.mutual", "kernel.curried", "main.con", "main.fun", "c.atoi", "c.printf"}

# the syntax each shape prints as (dump in upstream's surface syntax)
TEXT = {
    "main.con": re.compile(r"^con extern main \(m0: mem\.M 0, argc: I32, argv: .*, return\w*: Cn \[mem\.M 0, I32\]\)", re.M),
    "main.fun": re.compile(r"^fun extern main \(m0: mem\.M 0, argc: I32, argv: .*\): \[mem\.M 0, I32\]", re.M),
    "kernel.curried": re.compile(r"^con kernel\d* \(n\w*: I32\) \(m1\w*: mem\.M 1", re.M),
    "cont.curried": re.compile(r"con join\w* \(c\w*: I32\) \(m1\w*: mem\.M 1"),
    "branch.lam_target": re.compile(r"\(lm \(\w+: mem\.M 1, \w+: mem\.M 3, \w+: mem\.M 5\)"),
    "branch.cont_param": re.compile(r"\(other\w*, k\w*\)#"),
    "branch.return_param": re.compile(r"\(finish\w*, return\w*\)#"),
    "c.atoi": re.compile(r"^c(con|fun) atoi ", re.M),
    "c.printf": re.compile(r"^c(con|fun) printf ", re.M),
}


def _collect(strategy: Any, n: int = 25) -> list[Any]:
    out: list[Any] = []

    @settings(SETTINGS, max_examples=n)
    @given(strategy)
    def run(p: Any) -> None:
        out.append(p)
    run_with_big_stack(run)
    return out


def test_every_shape_is_generated_printed_in_upstream_syntax_and_round_trips() -> None:
    # (the program set before argv was read through core.idx_unsafe, host loops were drawn and
    # kernels launched twice)
    progs = _collect(programs(max_kernels=2, max_ops=4, argv_unsafe=False, host_loops=False, relaunch=False), 80)
    seen: set[str] = set()
    for p in progs:
        assert canonical(p.text) == p.text
        for shape, pattern in TEXT.items():
            if shape in p.features_used:
                seen.add(shape)
                assert pattern.search(p.text), f"{shape} not printed as upstream writes it:\n{p.text}"
        seen |= p.features_used & NEW_SHAPES
    assert NEW_SHAPES <= seen, f"never generated: {sorted(NEW_SHAPES - seen)}"


def test_shapes_switch_off_with_their_features() -> None:
    off = dict(cont_params=False, lam_targets=False, curried=False, mutual_rec=False, main_con=False)
    for p in _collect(programs(max_kernels=2, max_ops=4, **off), 15):
        assert not p.features_used & (NEW_SHAPES - {"main.fun", "c.atoi", "c.printf"})
        assert "main.fun" in p.features_used


def test_supported_shapes_pass_the_oracle() -> None:
    # Generating is cheap, checking is not: from 60 programs, check one per shape wanted plus
    # the first others up to 12, so that the shapes checked do not depend on which examples a
    # Hypothesis version draws.
    wanted = ("branch.cont_param", "main.con", "branch.lam_target", "kernel.curried", "cont.curried")
    progs = _collect(programs(max_kernels=1, max_ops=4, host_recursion=False, stateful_shapes=False,
                              streams=False, with_streams=False, buffers=False, generic=False,
                              argv_unsafe=False, host_loops=False), 60)
    picked = [next(p for p in progs if shape in p.features_used) for shape in wanted
              if any(shape in p.features_used for p in progs)]
    picked += [p for p in progs if p not in picked][:max(0, 12 - len(picked))]
    seen: set[str] = set()
    for p in picked:
        v = check_generated(p, verify=False, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"
        seen |= p.features_used
    assert set(wanted) <= seen, f"not generated in 60 programs: {sorted(set(wanted) - seen)}"


def test_recursive_host_functions_are_generated_with_a_slot_per_level_and_pass_the_oracle() -> None:
    progs = [p for p in _collect(programs(max_kernels=1, max_ops=2, streams=False, with_streams=False,
                                          buffers=False, btensor=False), 60) if "fun.recursive" in p.features_used]
    assert progs, "no recursive host function in 60 programs"
    header = re.compile(r"^fun depth \(dm: mem\.M 0, dn: I32\): \[mem\.M 0, I32\] =\n\s+let \w+ = mem\.slot", re.M)
    for p in progs[:3]:
        assert header.search(p.text), p.text
        assert canonical(p.text) == p.text
        v = check_generated(p, verify=False, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"


def test_generated_shapes_pass_the_oracle_with_streams_and_specifications() -> None:
    for p in _collect(programs(max_kernels=1, max_ops=3), 8):
        v = check_generated(p, verify=True, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"


def _interp(text: str, args: tuple[str, ...]) -> tuple[Any, bytes]:
    from verimim.interp.machine import Machine, find_main

    w = reparse(text)
    m = Machine(w, fuel=2_000_000)
    r = run_with_big_stack(lambda: m.run_main(find_main(w), ["prog.mim", *args]))
    return r, bytes(m.stdout)


def _with_c(name: str) -> Any:
    for p in _collect(programs(max_kernels=1, max_ops=2, streams=False, with_streams=False,
                               buffers=False, curried=False, lam_targets=False), 60):
        if f"c.{name}" in p.features_used:
            return p
    raise AssertionError(f"no program calls {name}")


def test_atoi_reads_the_numeric_program_arguments() -> None:
    p = _with_c("atoi")
    assert p.args and all(a.isdigit() for a in p.args)
    r0, _ = _interp(p.text, p.args)
    # a wrong argument vector must change the result: the value read is used
    bumped = tuple(str(int(a) + 1) for a in p.args)
    r1, _ = _interp(p.text, bumped)
    assert (int(r1) - int(r0)) % 2 ** 32 == 1


def test_argv_is_read_through_core_idx_unsafe_as_upstream_reads_it_and_passes_the_oracle() -> None:
    """atoi's argument as `mem.lea (argv, core.idx_unsafe k)` on argv's own type: k a literal (the
    World holds the literal `k_⊤` it folds to) or computed (argc - 1, an operation, which the
    code generators refused and check's host model could not read)."""
    progs = [p for p in _collect(programs(max_kernels=1, max_ops=2, streams=False, with_streams=False,
                                          buffers=False, btensor=False), 250)
             if "argv.idx_unsafe" in p.features_used]
    lea = r"mem\.lea @\(⊤:Nat, ‹⊤:Nat; mem\.Ptr \(«⊤:Nat; I8», 0\)›, 0\) \(argv\w*, "
    computed = [p for p in progs if re.search(lea + r"core\.idx_unsafe \(", p.text)]
    literal = [p for p in progs if re.search(lea + r"\(\d+:\(Idx ⊤:Nat\)\)\)", p.text)]
    assert computed and literal, f"{len(computed)} computed, {len(literal)} literal in {len(progs)}"
    assert all("core.idx_unsafe" in p.features_used for p in computed)
    assert not any("core.idx_unsafe" in p.features_used for p in literal)  # no such operation left
    for p in (computed[0], literal[0]):
        assert canonical(p.text) == p.text
        v = check_generated(p, verify=True, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"


def test_printf_output_is_compared_by_the_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _with_c("printf")
    _, out = _interp(p.text, p.args)
    assert out, "printf printed nothing"
    assert check_generated(p, verify=False, schedules=1).ok
    # a printf that prints one byte more after its first run: same results, other output
    runs = [0]
    real = c_interp.SEMANTICS["printf"]

    def drifting(c: c_interp.Call, a: list[object]) -> object:
        runs[0] += 1
        if runs[0] > 1:
            c.write(b"?")
        return real(c, a)
    monkeypatch.setitem(c_interp.SEMANTICS, "printf", drifting)
    v = check_generated(p, verify=False, schedules=1)
    assert not v.ok and v.kind == "diff", (v.kind, v.message)


def test_generic_host_functions_are_specialised_per_type_and_pass_the_oracle() -> None:
    """`fun box {T: *}` (shapes_host.generic_box): printed as upstream writes a polymorphic
    function, called with explicit type arguments, and through the pipeline (lam_spec gives T,
    the normalizer then lays `core.trait.size T` out) the result stays the source's."""
    progs = [p for p in _collect(programs(max_kernels=1, max_ops=2, host_recursion=False, streams=False,
                                          with_streams=False, buffers=False, btensor=False), 40)
             if "host.generic" in p.features_used]
    assert progs, "no generic host function in 40 programs"
    header = re.compile(r"^fun box \{T: \*\} \(bm: mem\.M 0, bv: T\): \[mem\.M 0, mem\.Ptr \(T, 0\)\] =\n"
                        r"\s+let \w+ = mem\.(malloc \(T, 0\) \(bm, (core\.trait\.size T|core\.nat\.add "
                        r"\(core\.trait\.size T, core\.trait\.align T\))\)|alloc \(T, 0\) bm);", re.M)
    for p in progs[:2]:
        assert header.search(p.text), p.text
        assert re.search(r"\bbox @I(8|16|32|64) \(\(", p.text), p.text
        assert canonical(p.text) == p.text
        v = check_generated(p, verify=True, schedules=1)
        assert v.ok, f"{v.kind}: {v.message}\n{p.text}"
        assert dict(v.phases)["compile.lam_spec"] == "proved", v.phases


def test_host_loops_are_generated_before_or_after_the_launches_and_pass_the_oracle() -> None:
    """`con hloop (m0, i: I32[, acc: I32])` (shapes_host.host_loop): counted to a literal (or to
    argc plus a literal), its accumulator a parameter or a host slot, its exit nested or a
    continuation of its own, at times printing through putchar in every iteration. Past the
    host model's bound and before the launches, the model does not see the launches: the
    kernels' verdicts say so and stay right (what the oracle's runs show)."""
    progs = [p for p in _collect(programs(max_kernels=1, max_ops=2, host_recursion=False, generic=False,
                                          buffers=False, btensor=False), 300)
             if "host.loop" in p.features_used]
    loop = re.compile(r"con hloop \(m0\w*: mem\.M 0, i\w*: I32(, acc\w*: I32)?\) =\n\s+"
                      r"\(hloop_done\w*, hloop_step\w*\)#\(core\.icmp\.ul @4294967296 \(i\w*, "
                      r"(\d+I32|argc\w*|core\.wrap\.add @4294967296 0 \((argc\w*, \d+I32|\d+I32, argc\w*)\))\)\)")
    kinds = {k for p in progs for k in p.features_used if k.startswith("host.loop")}
    assert {"host.loop_slot", "host.loop_exit_cont", "host.loop_putchar", "host.loop_past_bound", "host.loop_argc"} <= kinds, (len(progs), kinds)
    for p in progs:
        assert loop.search(p.text), p.text
        assert canonical(p.text) == p.text
    # every variant through the oracle once, with the specifications and the kernel verifier
    picked = {k: next(p for p in progs if k in p.features_used) for k in sorted(kinds)}
    for kind, p in picked.items():
        v = check_generated(p, verify=True, schedules=1)
        assert v.ok, f"{kind}: {v.kind}: {v.message}\n{p.text}"
