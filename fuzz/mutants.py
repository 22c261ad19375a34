"""Mutation analysis of verimim itself: deliberate bugs in the phases, normalizers, layouts and
the interpreter, and what catches each one.

A mutant is one textual replacement in one module (`old` occurs exactly once there). It is
loaded in a fresh Python process by compiling the patched source under the module's own name
before anything imports it, so the rest of verimim uses the broken code exactly as if it had
been written that way. Three killers run in turn, each stopping at the first difference:

- `check`: `verimim check` on the corpus (every program's diagnostics — severity, code and
  line — against those of the unmutated compiler);
- `run`: `verimim run` on the corpus programs that state their result (`// EXPECT:`);
- `fuzz`: a short seeded `verimim fuzz` run (any failure).

A mutant no killer catches *survives*; the report names it with the reason found by reading
it (an equivalent mutant, or a gap in what verimim checks). `benchmarks/mutation.py` runs the
catalogue and prints the table; research users add their own `Mutant`s for their phases.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    id: str
    module: str  # the dotted module the replacement is made in
    phase: str   # what it breaks, for the report (a phase, a normalizer, the interpreter, …)
    kind: str    # wrong side | off-by-one | forgotten case | wrong size | symbolic as literal | …
    old: str
    new: str
    what: str
    focus: tuple[str, ...] = ()  # words of programs likely to show it (checked first)


def _m(id: str, module: str, phase: str, kind: str, old: str, new: str, what: str,
       *focus: str) -> Mutant:
    return Mutant(id, module, phase, kind, old, new, what, focus)


_R, _C, _L, _I, _S = ("verimim.phases.repl", "verimim.phases.checks", "verimim.phases.lower_ptr",
                      "verimim.phases.inline", "verimim.phases.kernel_captures")
_B, _N, _O = "verimim.phases.btensor", "verimim.plug.core", "verimim.plug.core_ops"
_SP, _P = "verimim.phases.split", "verimim.phases.pipeline"

CATALOGUE: tuple[Mutant, ...] = (
    # ---------------------------------------------------------------- mem.alloc2malloc_repl
    _m("a2m-size-align", _R, "mem.alloc2malloc_repl", "wrong size",
       'w.tuple([m, size]))',
       'w.tuple([m, w.app(self.annex("core.trait.align"), t)]))',
       "malloc gets the type's alignment instead of its size", "mem.alloc"),
    _m("a2m-slot-id", _R, "mem.alloc2malloc_repl", "symbolic as literal",
       "w.tuple([m, size, slot_id])", "w.tuple([m, size, w.lit_nat(0)])",
       "every mslot gets id 0 instead of the slot's id", "mem.slot"),
    _m("a2m-no-slot", _R, "mem.alloc2malloc_repl", "forgotten case",
       'if full_app(old, "mem.slot", 2):', 'if False:',
       "slots are not rewritten (the phase says it did its work)", "mem.slot"),
    _m("a2m-slot-size", _R, "mem.alloc2malloc_repl", "wrong size",
       'w.tuple([m, size, slot_id])',
       'w.tuple([m, w.app(self.annex("core.trait.size"), w.sigma([t, t])), slot_id])',
       "mslot of twice the slot's size", "mem.slot"),
    # ---------------------------------------------------------------- gpu.host_malloc2gpualloc_repl
    _m("h2g-space", _R, "gpu.host_malloc2gpualloc_repl", "wrong side",
       "ty_a.ops[1] is w.lit_nat(1)):\n                return None\n            t = ty_a.ops[0]",
       "ty_a.ops[1] is w.lit_nat(0)):\n                return None\n            t = ty_a.ops[0]",
       "host (space 0) mallocs become device allocations, global ones stay", "mem.malloc", "gpu.alloc"),
    _m("h2g-no-free", _R, "gpu.host_malloc2gpualloc_repl", "forgotten case",
       'if full_app(old, "mem.free", 2):', 'if False:',
       "frees of global memory are not rewritten", "mem.free"),
    _m("h2g-any-size", _R, "gpu.host_malloc2gpualloc_repl", "forgotten case",
       "            if size is not want:\n", "            if False:\n",
       "a malloc of another size than its type becomes an allocation of the type (upstream's bug)",
       "mem.malloc"),
    # ---------------------------------------------------------------- gpu.remove_double_syncs
    _m("rds-any-entry", _R, "gpu.remove_double_syncs", "wrong side",
       "and all(block == src.mut.gid and ops.index(old.gid) == 0 for block, ops in blocks)",
       "and all(ops.index(old.gid) == 0 for block, ops in blocks)",
       "a sync on the kernel's entry tokens is dropped first in any block (the entry block's work "
       "ran before it)", "sync_work_items"),
    _m("rds-any-between", _R, "gpu.remove_double_syncs", "forgotten case",
       "return all(src.gid in ops and ops.index(old.gid) == ops.index(src.gid) + 1 for _, ops in blocks)",
       "return True",
       "a sync on the preceding sync's tokens is dropped though an operation runs between them (or "
       "the sync is another block's)", "sync_work_items"),
    _m("rds-any-source", _R, "gpu.remove_double_syncs", "forgotten case",
       "        if src is not b.tup:\n            return False\n", "",
       "the two tokens need not come from the same sync", "sync_work_items"),
    _m("rds-all", _R, "gpu.remove_double_syncs", "forgotten case",
       'if full_app(old, "gpu.sync_work_items", 1) and isinstance(old, App) and self.redundant(old):',
       'if full_app(old, "gpu.sync_work_items", 1) and isinstance(old, App):',
       "every sync is dropped", "sync_work_items"),
    _m("rds-swapped", _R, "gpu.remove_double_syncs", "wrong side",
       "        if (a.index.value, b.index.value) != (0, 1):\n            return False\n", "",
       "tokens of the preceding sync in either order count as straight from it", "sync_work_items"),
    # ---------------------------------------------------------------- gpu.check_addr_spaces_repl
    _m("cas-malloc-shared", _C, "gpu.check_addr_spaces_repl", "forgotten case",
       '("mem.malloc", frozenset({3, 4, 5})', '("mem.malloc", frozenset({4, 5})',
       "malloc in shared memory is accepted", "mem.malloc"),
    _m("cas-mslot-global", _C, "gpu.check_addr_spaces_repl", "forgotten case",
       '("mem.mslot", frozenset({1, 4})', '("mem.mslot", frozenset({4})',
       "mslot in global memory is accepted", "mem.mslot", "mem.slot"),
    _m("cas-store-const", _C, "gpu.check_addr_spaces_repl", "forgotten case",
       '("mem.store", frozenset({4})', '("mem.store", frozenset()',
       "stores to constant memory are accepted", "mem.store"),
    _m("cas-symbolic", _C, "gpu.check_addr_spaces_repl", "symbolic as literal",
       "value = _violating_value(a, bad)", "value = None",
       "a non-literal address space is accepted", "mem."),
    _m("cas-slot-shared", _C, "gpu.check_addr_spaces_repl", "wrong side",
       '("mem.slot", frozenset({1, 4})', '("mem.slot", frozenset({3, 4})',
       "slots are refused in shared memory and accepted in global memory", "mem.slot"),
    # ---------------------------------------------------------------- gpu.mem_checks
    _m("mc-one-token", _C, "gpu.mem_checks", "off-by-one",
       "        if mem_types_in(world, t):\n", "        if len(mem_types_in(world, t)) > 1:\n",
       "one memory token passed to a kernel is accepted", "gpu.launch"),
    _m("mc-no-return", _C, "gpu.mem_checks", "forgotten case",
       "        if isinstance(ret, Pi):\n", "        if False:\n",
       "main may return a device memory token", "main"),
    _m("mc-main-space", _C, "gpu.mem_checks", "wrong side",
       "m.arg.value == 0):\n                res.diagnostics.append(Diagnostic(\n"
       "                    \"E-MEM-CROSSING\", \"the `main` function must not take",
       "m.arg.value in (0, 1)):\n                res.diagnostics.append(Diagnostic(\n"
       "                    \"E-MEM-CROSSING\", \"the `main` function must not take",
       "main may take global memory", "main"),
    # ---------------------------------------------------------------- buffer.lower_ptr
    _m("lp-column-major", _L, "buffer.lower_ptr", "wrong side",
       "i = idx if rank == 1 else w.extract(idx, w.lit_idx(rank, k))",
       "i = idx if rank == 1 else w.extract(idx, w.lit_idx(rank, rank - 1 - k))",
       "multi-dimensional indices read in reverse order", "buffer."),
    _m("lp-malloc-size", _L, "buffer.lower_ptr", "wrong size",
       '        size = w.app(self.annex("core.trait.size"), a)\n',
       '        size = w.app(self.annex("core.trait.size"), t)\n',
       "a buffer's block has the size of one element", "buffer."),
    _m("lp-copy-reversed", _L, "buffer.lower_ptr", "wrong side",
       "m, dst, src = (w.extract_n(arg, 3, k) for k in range(3))",
       "m, src, dst = (w.extract_n(arg, 3, k) for k in range(3))",
       "buffer.copy copies the other way", "buffer.copy"),
    _m("lp-shape-rank1", _L, "buffer.lower_ptr", "symbolic as literal",
       "            return s  # `i: Idx 1` is 0", "            return w.lit_nat(1)  # `i: Idx 1` is 0",
       "the shape of a rank-1 buffer is 1", "buffer.shape"),
    _m("lp-init-value", _L, "buffer.lower_ptr", "wrong side",
       "return self.stored_fresh(w.extract_n(arg, 2, 0), s, t, w.extract_n(arg, 2, 1))",
       "return self.stored_fresh(w.extract_n(arg, 2, 0), s, t, w.pack(s, w.shift(w.lit_idx(2**32, 0), 1)))",
       "buffer.init stores zeros, not its values", "buffer.init"),
    # ---------------------------------------------------------------- compile.beta_red / lam_spec
    _m("inl-barrier-sites", _I, "compile.lam_spec", "off-by-one",
       "held = self._one_of_a_kind(f) if sites > 1 and",
       "held = self._one_of_a_kind(f) if sites > 2 and",
       "a continuation with a barrier and two call sites is inlined into both", "sync_work_items"),
    _m("inl-idx2", _I, "compile.beta_red", "off-by-one",
       "t.size.value == 1\n", "t.size.value <= 2\n",
       "values of an `Idx 2` are folded to 0 as if the type had one value", "lam "),
    _m("inl-launch-sites", _I, "compile.lam_spec", "forgotten case",
       "if d.gid in self.launched:", "if True:",
       "every call counts as a launch's kernel: a helper with a barrier and two call sites in one "
       "kernel is inlined into both", "sync_work_items"),
    # ---------------------------------------------------------------- gpu.split_apply (captures)
    _m("kc-read-order", _S, "gpu.split_apply", "wrong side",
       "            self.memo[x.gid] = parts[lift.n + j]\n",
       "            self.memo[x.gid] = parts[lift.n + len(lift.caps) - 1 - j]\n",
       "a lifted kernel reads its captured values in reverse order", "gpu.launch"),
    _m("kc-host-order", _S, "gpu.split_apply", "wrong side",
       "parts = _parts(w, ops[1], lift.n) + [rw.rewrite(x) for x in lift.caps]",
       "parts = _parts(w, ops[1], lift.n) + [rw.rewrite(x) for x in reversed(lift.caps)]",
       "the host passes captured values in reverse order", "gpu.launch"),
    # ---------------------------------------------------------------- gpu.lower_btensor_map_reduce
    _m("bt-floor-groups", _B, "gpu.lower_btensor_map_reduce", "off-by-one",
       "return -(-total // n_items), n_items", "return max(total // n_items, 1), n_items",
       "too few groups when the cells are not a multiple of the group size", "btensor."),
    _m("bt-cell-stride", _B, "gpu.lower_btensor_map_reduce", "off-by-one",
       'b.bitcast(w.idx_n(n_groups), b.I64, group), b.i64(n_items)),',
       'b.bitcast(w.idx_n(n_groups), b.I64, group), b.i64(max(n_items - 1, 1))),',
       "the cell of a work-item uses a group stride one too small", "btensor."),
    _m("bt-guard", _B, "gpu.lower_btensor_map_reduce", "off-by-one",
       'return self.ap("core.icmp.ul", self.w.lit_nat(2 ** 64), self.tup(a, self.i64(b)))',
       'return self.ap("core.icmp.ule", self.w.lit_nat(2 ** 64), self.tup(a, self.i64(b)))',
       "the surplus guard lets the cell `total` through", "btensor."),
    # ---------------------------------------------------------------- core normalizers
    _m("core-shl-width", _N, "core normalizers", "off-by-one",
       'if name == "shl" and b >= ops.width(s):', 'if name == "shl" and b > ops.width(s):',
       "a shift left by exactly the width is folded (it is poison)", "core.wrap.shl"),
    _m("core-nuw", _N, "core normalizers", "forgotten case",
       "if mode & MODE_NUW and ops.wrap_unsigned_overflow(name, s, a, b):\n            return None",
       "if False:\n            return None",
       "an unsigned overflow under `nuw` folds to the wrapped value", "core.wrap"),
    _m("core-bitcast-fit", _N, "core normalizers", "off-by-one",
       "if dst_n is not None and x.value >= dst_n:", "if dst_n is not None and x.value > dst_n:",
       "bitcast of a literal equal to the target's size folds (out of range)", "core.bitcast"),
    _m("core-shr-width", _N, "core normalizers", "off-by-one",
       "        if b >= ops.width(s):\n            return None\n        return w.lit(w.idx(s_def), ops.shr(",
       "        if b > ops.width(s):\n            return None\n        return w.lit(w.idx(s_def), ops.shr(",
       "a shift right by the width is folded", "core.shr"),
    _m("core-trait-swap", _N, "core normalizers", "wrong side",
       'return w.lit_nat(lay.size if which == "size" else lay.align)',
       'return w.lit_nat(lay.align if which == "size" else lay.size)',
       "core.trait.size folds to the alignment", "mem.alloc", "core.trait"),
    _m("core-idx-range", _N, "core normalizers", "off-by-one",
       "    if l_def.value < s:\n        return w.lit(w.idx(s_def), l_def.value)",
       "    if l_def.value <= s:\n        return w.lit(w.idx(s_def), l_def.value)",
       "core.idx of a literal equal to the size folds to itself", "core.idx"),
    # ---------------------------------------------------------------- semantics shared by folds and the interpreter
    _m("ops-ule", _O, "core semantics", "off-by-one",
       '"l": lambda: a < b, "le": lambda: a <= b,\n            "g": lambda: a > b, "ge": lambda: a >= b}[name]()\n\n\ndef ncmp',
       '"l": lambda: a < b, "le": lambda: a < b,\n            "g": lambda: a > b, "ge": lambda: a >= b}[name]()\n\n\ndef ncmp',
       "icmp `le` (signed and unsigned) computes `<`", "core.icmp"),
    _m("ops-signed-unsigned", _O, "core semantics", "wrong side",
       '    if name.startswith("s"):\n        a, b = signed(a, s), signed(b, s)',
       '    if name.startswith("u"):\n        a, b = signed(a, s), signed(b, s)',
       "unsigned comparisons compare the signed values", "core.icmp"),
    _m("ops-nat-sub", _O, "core semantics", "off-by-one",
       "return ite(a >= b, a - b, 0)  # saturates at 0", "return ite(a >= b, a - b, 1)  # saturates at 0",
       "Nat subtraction saturates at 1", "core.nat.sub"),
    # ---------------------------------------------------------------- layouts (sizes of types)
    _m("layout-no-pad", "verimim.layout", "layouts", "wrong size",
       "        return Layout(_align_up(offset, align), align)", "        return Layout(offset, align)",
       "a sigma's size is not rounded up to its alignment", "mem.alloc", "["),
    _m("layout-array", "verimim.layout", "layouts", "off-by-one",
       "        return Layout(t.shape.value * lay.size, lay.align)",
       "        return Layout(max(t.shape.value - 1, 1) * lay.size, lay.align)",
       "an array is one element too small", "«"),
    # ---------------------------------------------------------------- a second round, over every phase:
    # a wrong address space, a dropped store or free, a stale accumulator, a corner (a type of
    # exactly 2^64 bytes, a divisor that is no power of two), a check forgotten (each refuted by
    # its phase's specification on a corpus program)
    _m('a2m-slot-space0', _R, 'mem.alloc2malloc_repl', 'wrong address space',
       'new = w.app(w.app(self.annex("mem.mslot"), ty_a), w.tuple([m, size, slot_id]))',
       'new = w.app(w.app(self.annex("mem.mslot"), w.tuple([t, w.lit_nat(0)])), w.tuple([m, size, slot_id]))',
       "every mslot is made in address space 0 (the slot's space dropped)", 'mem.slot'),
    _m('a2m-alloc-space0', _R, 'mem.alloc2malloc_repl', 'wrong address space',
       'new = w.app(w.app(self.annex("mem.malloc"), ty_a), w.tuple([m, size]))',
       'new = w.app(w.app(self.annex("mem.malloc"), w.tuple([t, w.lit_nat(0)])), w.tuple([m, size]))',
       'every malloc made from an alloc is in address space 0', ', 1) m1', ', 3) m3'),
    _m('a2m-too-large-obo', _R, 'mem.alloc2malloc_repl', 'off-by-one',
       'if not (isinstance(size, Lit) and size.value >= 2**64):',
       'if not (isinstance(size, Lit) and size.value > 2**64):',
       'a type of exactly 2^64 bytes is rewritten (its malloc asks for 0 bytes on a target)', '2305843009213693952'),
    _m('h2g-free-any-space', _R, 'gpu.host_malloc2gpualloc_repl', 'forgotten case',
       '            if not (isinstance(ty_a, Tuple) and ty_a.ops[1] is w.lit_nat(1)):\n                return None\n            new = w.app(w.app(self.annex("gpu.free.block")',
       '            new = w.app(w.app(self.annex("gpu.free.block")',
       'every free (host memory too) becomes gpu.free.block', 'mem.free'),
    _m('h2g-kernel-code', _R, 'gpu.host_malloc2gpualloc_repl', 'forgotten case',
       '        if old.gid in self.kernel_code:\n            return None\n',
       '',
       "a kernel's own global malloc in an unsplit World becomes a host gpu.alloc.block", 'host_malloc2gpualloc_repl'),
    _m('h2g-captured-as-kernel', _R, 'gpu.host_malloc2gpualloc_repl', 'forgotten case',
       '            if deps and deps.isdisjoint(reached):\n                continue  # computed outside, captured\n',
       '',
       'values a kernel captures from its enclosing function count as kernel code (their mallocs are left)', 'host_malloc2gpualloc_repl'),
    _m('rds-one-between', _R, 'gpu.remove_double_syncs', 'off-by-one',
       'ops.index(old.gid) == ops.index(src.gid) + 1 for _, ops in blocks)',
       'ops.index(old.gid) <= ops.index(src.gid) + 2 for _, ops in blocks)',
       'a sync is dropped though one memory operation runs between it and the preceding sync', 'sync_work_items'),
    _m('rds-load-pure', _R, 'gpu.remove_double_syncs', 'forgotten case',
       'head.annex in ("mem.lea", "mem.M", "mem.Ptr")',
       'head.annex in ("mem.lea", "mem.M", "mem.Ptr", "mem.load")',
       'loads are taken for pure: a sync separating a load from later stores is dropped', 'sync_work_items'),
    _m('rds-entry-any-mut', _R, 'gpu.remove_double_syncs', 'wrong side',
       'return isinstance(src, Var) and src.mut.gid in self.kernels \\',
       'return isinstance(src, Var) \\',
       "a sync on any continuation's parameter tokens counts as on a kernel's entry tokens", 'sync_work_items'),
    _m('rds-jumped-back', _R, 'gpu.remove_double_syncs', 'forgotten case',
       'kernels = {k.gid for k in kernels_of(world) if k.gid not in entered}',
       'kernels = {k.gid for k in kernels_of(world)}',
       'a kernel that jumps back to itself: its parameters count as fresh entry tokens', 'sync_work_items'),
    _m('cas-free-local', _C, 'gpu.check_addr_spaces_repl', 'forgotten case',
       '("mem.free", frozenset({3, 4, 5})',
       '("mem.free", frozenset({3, 4})',
       'mem.free of local memory is accepted', 'mem.free'),
    _m('mc-con-main-first', _C, 'gpu.mem_checks', 'off-by-one',
       'args = [world.shift(op, -1) for op in dom.ops[:-1]]',
       'args = [world.shift(op, -1) for op in dom.ops[:1]]',
       "only main's first parameter is checked (con-form main's later tokens pass)", 'con extern main'),
    _m('mc-nested-token', _C, 'gpu.mem_checks', 'forgotten case',
       '        if mem_types_in(world, t):\n            kname',
       "        if any(getattr(getattr(f, 'head', None), 'annex', None) == 'mem.M' for f in (t.ops if isinstance(t, Sigma) else (t,))):\n            kname",
       'a mem.M nested inside a launch argument (a pair in a pair) is not found', 'gpu.launch'),
    _m('inl-scan-own-body', _I, 'compile.lam_spec', 'forgotten case',
       'stack: list[Def] = [m.body for m in local if m.body is not None and m not in whole]',
       'stack: list[Def] = [f.body] if f.body is not None else []',
       "the barrier scan looks only at f's own body, not the continuations nested in it", 'sync_work_items'),
    _m('inl-local-owner-only', _I, 'compile.beta_red', 'wrong scope',
       'return any(m.gid in local for m in self.scopes.deps(d))',
       'return any(m.gid == f.gid for m in self.scopes.deps(d))',
       "only nodes depending on f's own parameter are copied; those of nested mutables are shared", 'with_streams', 'lam '),
    _m('sp-host-own-name', _SP, 'gpu.split_apply', 'forgotten case',
       '        name = self.names.get(old.gid)\n        if name is None:\n            return None\n        lift',
       '        name = old.name if old.gid in self.names else None\n        if name is None:\n            return None\n        lift',
       'the host declares each kernel under its own name (the suffix of a second specialisation forgotten)', 'generic_kernel', 'twice'),
    _m('sp-suffix-0', _SP, 'gpu.split_apply', 'off-by-one',
       '        while name in taken:\n            n += 1\n            name = f"{base}_{n}"',
       '        while name in taken:\n            name = f"{base}_{n}"\n            n += 1',
       'the first free suffix is _0, not _1', 'twice'),
    _m('sp-kc-first-cap', _S, 'gpu.split_apply', 'off-by-one',
       '            self.memo[x.gid] = parts[lift.n + j]\n',
       '            self.memo[x.gid] = parts[lift.n]\n',
       "every captured value reads the first capture's argument", 'curried', 'captur'),
    _m('sp-host-load-ok', _SP, 'gpu.split_apply', 'forgotten case',
       '_HOST_MEMORY_VERBS = {"mem.load": "reads", "mem.store"',
       '_HOST_MEMORY_VERBS = {"mem.store"',
       'a kernel that reads host memory is accepted', 'host memory'),
    _m('sp-c-call-ok', _SP, 'gpu.split_apply', 'forgotten case',
       'for d in walk(dev.new):\n            # a C function is host code',
       'for d in ():\n            # a C function is host code',
       'a C function called in a kernel is accepted', 'cfun'),
    _m('sp-runtime-kernel', _SP, 'gpu.split_apply', 'forgotten case',
       '            if not isinstance(app.arg, MutLam):\n                # A kernel',
       '            if False:\n                # A kernel',
       'a kernel chosen at run time is not refused', 'gpu.launch'),
    _m('lp-write-drop-store', _L, 'buffer.lower_ptr', 'dropped side effect',
       'return w.tuple([self.mem_op("mem.store", t, w.tuple([m, p, v])), b])',
       'return w.tuple([m, b])',
       'buffer.write stores nothing', 'buffer.write'),
    _m('lp-index-next', _L, 'buffer.lower_ptr', 'off-by-one',
       'i = idx if rank == 1 else w.extract(idx, w.lit_idx(rank, k))',
       'i = idx if rank == 1 else w.extract(idx, w.lit_idx(rank, min(k + 1, rank - 1)))',
       'dimension k is indexed by idx#(k+1) (the last by itself)', 'buffer.read'),
    _m('lp-shape-dim0', _L, 'buffer.lower_ptr', 'symbolic as literal',
       '        return w.extract(s, w.extract_n(arg, 2, 1))',
       '        return w.extract(s, w.lit_idx(r.value, 0)) if isinstance(r, Lit) else w.extract(s, w.extract_n(arg, 2, 1))',
       'buffer.shape gives dimension 0 whatever the index', 'buffer.shape'),
    _m('lp-init-no-store', _L, 'buffer.lower_ptr', 'dropped side effect',
       'return self.stored_fresh(w.extract_n(arg, 2, 0), s, t, w.extract_n(arg, 2, 1))',
       'return self.malloc(w.extract_n(arg, 2, 0), s, t)',
       'buffer.init allocates but stores nothing', 'buffer.init'),
    _m('bt-divmod-floor', _B, 'gpu.lower_btensor_map_reduce', 'off-by-one',
       'magic = -(-(1 << s) // d)',
       'magic = (1 << s) // d',
       'the magic number of the division is rounded down', 'btensor.'),
    _m('bt-stale-acc', _B, 'gpu.lower_btensor_map_reduce', 'stale value',
       'nxt.body = w.app(loop, b.tup(m, b.wrap("add", r, b.i64(1)), acc2))',
       'nxt.body = w.app(loop, b.tup(m, b.wrap("add", r, b.i64(1)), bacc))',
       "the fold loop carries the old accumulator, not f's result", 'btensor.'),
    _m('bt-no-free-out', _B, 'gpu.lower_btensor_map_reduce', 'dropped side effect',
       'for d, t in devs + [(d_out, out_t)]:',
       'for d, t in devs:',
       "the output's device buffer is never freed", 'btensor.'),
    _m('bt-free-before-copy', _B, 'gpu.lower_btensor_map_reduce', 'wrong order',
       '        if self.phase.copy_back:\n            k0, k1 = b.xs(b.ap("gpu.buf_copy_to_host", rst_out, b.tup(k0, k1, d_out, host)), 2)\n        for d, t in devs + [(d_out, out_t)]:\n            k1 = b.ap("gpu.free.block", t, b.tup(k1, d))\n',
       '        for d, t in devs + [(d_out, out_t)]:\n            k1 = b.ap("gpu.free.block", t, b.tup(k1, d))\n        if self.phase.copy_back:\n            k0, k1 = b.xs(b.ap("gpu.buf_copy_to_host", rst_out, b.tup(k0, k1, d_out, host)), 2)\n',
       'the device buffers are freed before the result is copied back', 'btensor.'),
    _m('cl-only-main', _P, 'compile.cleanup', 'forgotten case',
       'worlds = [Rewriter(w).run() for w in prog.worlds()]',
       "worlds = [Rewriter(w).run(lambda n: n != 'main') for w in prog.worlds()]",
       'cleanup keeps only main as a root (other externals made internal)', 'extern'),
    _m('cl-prefix-contains', _P, 'compile.prefix_cleanup_phase', 'wrong predicate',
       '            return name.startswith(self.prefix)',
       '            return self.prefix in name',
       'prefix cleanup internalises names containing the prefix anywhere', 'prefix_cleanup_phase'),
    _m('lp-copy-elem', _L, 'buffer.lower_ptr', 'wrong size',
       'return w.app(w.app(self.annex("buffer.ptr_copy"), self.array(s, t)), w.tuple([m, dst, src]))',
       'return w.app(w.app(self.annex("buffer.ptr_copy"), t), w.tuple([m, dst, src]))',
       'buffer.copy copies one element, not the array', 'buffer.copy'),
    _m('mc-return-first', _C, 'gpu.mem_checks', 'off-by-one',
       'for m in mem_types_in(world, ret.dom):',
       'for m in mem_types_in(world, ret.dom.ops[0] if isinstance(ret.dom, Sigma) and ret.dom.ops else ret.dom):',
       'only the first value main returns is checked for a device token', 'main'),
    _m('bt-post-reversed', _B, 'gpu.lower_btensor_map_reduce', 'wrong side',
       'm, y = b.load(op.elem, m, b.lea(ptr, op.shape, op.elem, [o[p] for p in op.positions], 1))',
       'm, y = b.load(op.elem, m, b.lea(ptr, op.shape, op.elem, [o[len(o) - 1 - p] for p in op.positions], 1))',
       'post inputs are indexed by the output coordinates in reverse', 'map_reduce_post'),
    _m('bt-loop-from-1', _B, 'gpu.lower_btensor_map_reduce', 'off-by-one',
       'work.body = w.app(loop, b.tup(wm1, b.i64(0), init))',
       'work.body = w.app(loop, b.tup(wm1, b.i64(1), init))',
       'the fold starts at the second reduction point', 'btensor.'),
    _m('bt-copy-first-input', _B, 'gpu.lower_btensor_map_reduce', 'copy-paste',
       'm0, m1, d = b.xs(b.ap("gpu.buf_alloc_copy", rst, b.tup(m0, m1, op.buf)), 3)',
       'm0, m1, d = b.xs(b.ap("gpu.buf_alloc_copy", rst, b.tup(m0, m1, (mr.ins + mr.posts)[0].buf if (mr.ins + mr.posts)[0].shape == op.shape and (mr.ins + mr.posts)[0].elem is op.elem else op.buf)), 3)',
       "every input of the first input's shape is copied from the first input's buffer", 'btensor.'),
)


def source_path(m: Mutant) -> Path:
    spec = importlib.util.find_spec(m.module)
    if spec is None or spec.origin is None:
        raise LookupError(f"no module {m.module}")
    return Path(spec.origin)


def occurrences(m: Mutant) -> int:
    """How often the mutant's `old` text occurs in its module (a valid mutant: exactly once)."""
    return source_path(m).read_text(encoding="utf-8").count(m.old)


def install(m: Mutant) -> None:
    """Load m's module from its patched source, under its own name, before anything imports
    it (the process must not have imported it yet)."""
    if m.module in sys.modules:
        raise RuntimeError(f"{m.module} is already imported: a mutant needs a fresh process")
    path = source_path(m)
    text = path.read_text(encoding="utf-8")
    if text.count(m.old) != 1:
        raise ValueError(f"mutant {m.id}: its text occurs {text.count(m.old)} times in {path}")
    parent, _, child = m.module.rpartition(".")
    if parent:
        importlib.import_module(parent)
    spec = importlib.util.spec_from_file_location(m.module, path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[m.module] = module
    try:
        exec(compile(text.replace(m.old, m.new, 1), str(path), "exec"), module.__dict__)  # noqa: S102
    except BaseException:
        del sys.modules[m.module]
        raise
    if parent:
        setattr(sys.modules[parent], child, module)


# ------------------------------------------------------------------------------ the killers


def check_outcome(path: str) -> list[tuple[str, str, int]]:
    """What `verimim check` says about a program: its diagnostics (severity, code, line)."""
    from verimim import driver

    rep = driver.check(path, [])
    return sorted({(d.severity, d.code, d.loc.line if d.loc else 0) for d in rep.diagnostics})


def run_result(path: str, args: list[str]) -> str:
    """What `verimim run` gives: the result, or the error codes."""
    from verimim import driver

    rep = driver.run(path, [], args)
    errors = sorted(d.code for d in rep.diagnostics if d.severity == "error")
    return " ".join(errors) if errors else str(rep.data.get("result"))


def ordered(corpus: list[str], m: Mutant | None) -> list[str]:
    """The corpus with the programs that mention one of m's focus words first."""
    if m is None or not m.focus:
        return corpus
    def hit(p: str) -> bool:
        text = Path(p).read_text(encoding="utf-8")
        return any(f in text for f in m.focus)
    return sorted(corpus, key=lambda p: not hit(p))


def kill(m: Mutant | None, corpus: list[str], baseline: dict[str, Any], fuzz_s: float,
         fuzz_seed: int) -> dict[str, Any]:
    """Run the killers on the (already installed) mutant m; the baseline's outcomes are the
    unmutated compiler's. Without a baseline (m None) it computes one."""
    from verimim.driver import run_with_big_stack
    from verimim.pytest_plugin import Annotations

    out: dict[str, Any] = {"id": m.id if m else None, "killed_by": None, "program": None, "detail": ""}
    t0 = time.monotonic()
    programs = ordered(corpus, m)
    checks: dict[str, Any] = {}
    for p in programs:
        got = run_with_big_stack(lambda: check_outcome(p))
        checks[p] = got
        if m is not None and [tuple(x) for x in baseline["check"][p]] != got:
            out.update(killed_by="check", program=p, detail=f"{baseline['check'][p]} became {got}")
            break
    runs: dict[str, str] = {}
    if out["killed_by"] is None:
        for p in programs:
            ann = Annotations.parse(Path(p).read_text(encoding="utf-8"))
            if ann.get("EXPECT") is None:  # only programs that state their result
                continue
            got_r = run_with_big_stack(lambda: run_result(p, ann.args))
            runs[p] = got_r
            if m is not None and baseline["run"].get(p) != got_r:
                out.update(killed_by="run", program=p, detail=f"result {baseline['run'].get(p)} became {got_r}")
                break
    if out["killed_by"] is None and m is not None and fuzz_s > 0:
        from verimim.fuzz.strategies import run_campaign

        res = run_campaign(fuzz_s, seed=fuzz_seed, max_failures=1)
        if res.failures:
            f = res.failures[0]
            out.update(killed_by="fuzz", program=f["file"], detail=f"{f['kind']}: {f['message'][:200]}")
        out["fuzz_programs"] = res.programs
    out["seconds"] = round(time.monotonic() - t0, 1)
    if m is None:
        out["check"], out["run"] = checks, runs
    return out


def worker(argv: list[str]) -> int:
    """`python -m verimim.fuzz.mutants ID CORPUS.json [BASELINE.json] FUZZ_S SEED`: one mutant
    (or `none`, the baseline) in this fresh process; prints its result as one JSON line."""
    mid, corpus_file, baseline_file, fuzz_s, seed = argv
    corpus = json.loads(Path(corpus_file).read_text(encoding="utf-8"))
    m = None if mid == "none" else next(x for x in CATALOGUE if x.id == mid)
    if m is not None:
        install(m)
    baseline = json.loads(Path(baseline_file).read_text(encoding="utf-8")) if baseline_file != "-" else {}
    print(json.dumps(kill(m, corpus, baseline, float(fuzz_s), int(seed))), flush=True)
    return 0


def as_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {m.id: m for m in CATALOGUE}
    return [dict(asdict(by_id[r["id"]]), **r) for r in results if r.get("id") in by_id]


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1:]))
