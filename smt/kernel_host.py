"""The host side of a launch for the kernel verifier: what the kernel's arguments and the launch
sizes are, as functions of main's inputs.

A launch `gpu.launch (n_groups, n_items, s, m, MT) kernel args` is read on the host World the
pipeline produced. Each scalar argument and launch size that is a `core` expression of literals
and main's `argc` is encoded with `smt.bv` and tied to the kernel's variable; a pointer argument
that is an allocation's result (`mem.alloc`/`mem.malloc`/`gpu.alloc.*`/a slot) points to offset
0 of that allocation's object, and distinct allocations are distinct objects. Anything else
(a value loaded from memory, a parameter of a continuation, argv's contents) stays unconstrained:
the kernel is then verified for every value it might have, which is sound for proofs but may
refute a launch the program never makes — such a refutation stands only where a run shows it
(smt.kernel_confirm).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import z3

from verimim.diagnostics import Loc
from verimim.ir.defs import App, Axiom, Def, Extract, Lit, MutLam, Sigma, Tuple, Var
from verimim.ir.world import World
from verimim.phases.base import is_app_of, walk
from verimim.smt import bv
from verimim.smt import z3_typed as z3t
from verimim.smt.kernel_eval import OBJ_BITS, Ptr
from verimim.smt.kernel_model import KernelInputs
from verimim.smt.kernel_queries import Launch

ALLOCATIONS = frozenset({"mem.alloc", "mem.malloc", "mem.slot", "mem.mslot", "gpu.alloc.block", "gpu.alloc.asyn"})
FIRST_HOST_OBJ = 0x10000  # above every device-side object id (slots, the dynamic shared block)
ARGC_BITS = 32


@dataclass(frozen=True)
class LaunchSite:
    app: App
    kernel: str
    config: Def
    args: Def

    @property
    def loc(self) -> Loc | None:
        return op_loc(self.app)


def op_loc(d: App) -> Loc | None:
    """Where the program writes an operation: for a launch, its `gpu.launch …` expression, as
    `run` and E-STREAM point at it (the application to its continuation that `ret (…) =
    gpu.launch … $ (…);` makes has the place of the whole statement, its `ret`)."""
    c = d.callee
    if d.depth == 5 and isinstance(c, App) and c.loc is not None and is_app_of(d, "gpu.launch"):
        return c.loc
    return d.loc


def launch_sites(host: World) -> list[LaunchSite]:
    """Every `gpu.launch` of the host World whose kernel is a named continuation, in source order."""
    out = []
    for d in walk(host):
        if isinstance(d, App) and d.depth == 5 and is_app_of(d, "gpu.launch"):
            _imp, config, kernel, kargs, _mems = d.args()
            if isinstance(kernel, MutLam):
                out.append(LaunchSite(d, kernel.name or "?", config, kargs))
    return sorted(out, key=lambda s: (s.loc.line, s.loc.col) if s.loc else (0, 0))


class _MainInputs(dict):  # type: ignore[type-arg]
    """`bv.encode`'s env on the host: main's argc is the one free variable with a value."""

    def __init__(self, main: MutLam | None, argc: z3.BitVecRef) -> None:
        super().__init__()
        self.main, self.argc = main, argc

    def _is_argc(self, d: object) -> bool:
        """main's parameter is (its arguments, its return continuation): argc is `main#0#1`
        (`main#1` for a `con main (m0, argc, argv, return)`)."""
        if not (isinstance(d, Extract) and isinstance(d.index, Lit) and d.index.value == 1):
            return False
        args = d.tup
        if isinstance(args, Var) and args.mut is self.main:
            dom = args.mut.pi.dom  # args.mut is self.main
            return isinstance(dom, Sigma) and len(dom.ops) == 4
        return (isinstance(args, Extract) and isinstance(args.index, Lit) and args.index.value == 0
                and isinstance(args.tup, Var) and args.tup.mut is self.main)

    def __contains__(self, d: object) -> bool:
        return self._is_argc(d)

    def __getitem__(self, d: Def) -> z3.ExprRef:
        if self._is_argc(d):
            return self.argc
        raise KeyError(d)


def _allocation(d: Def) -> App | None:
    if isinstance(d, Extract) and isinstance(d.index, Lit) and d.index.value == 1 and isinstance(d.tup, App) \
            and isinstance(d.tup.head, Axiom) and d.tup.head.annex in ALLOCATIONS:
        return d.tup
    return None


def _grows_a_nat(d: Def) -> bool:
    """Whether d computes a Nat sum or product: smt.bv holds a Nat in 130 bits and wraps past
    them, the interpreter's Nat has no bound ((2^33·argc)^4 is 0 there, not here). Such a
    value is left to main's paths (`bind_from_paths`), where the model makes it unknown
    wherever it may pass those bits. (d's own expression: not `phases.base.walk`, which goes
    on into the bodies of the mutables it meets — main's whole body, through argc.)"""
    seen: set[int] = set()
    todo = [d]
    while todo:
        x = todo.pop()
        if x.gid in seen or isinstance(x, MutLam):
            continue
        seen.add(x.gid)
        if is_app_of(x, "core.nat.add") or is_app_of(x, "core.nat.mul"):
            return True
        todo.extend(x.ops)
    return False


def _components(world: World, d: Def, n: int) -> list[Def]:
    if isinstance(d, Tuple) and len(d.ops) == n:
        return list(d.ops)
    return [world.extract_n(d, n, k) for k in range(n)]


def bind_launch(host: World, site: LaunchSite, inp: KernelInputs, issued: z3.BoolRef | None = None) -> Launch:
    """The launch's constraints: its arguments and sizes as the host computes them from main's
    argc, and `issued`, when main issues it at all (kernel_streams.HostRun.launch_reach: a launch
    under `argc == 4` races only there). Where a constraint depends on more than argc (a value
    the host loaded), the launch is not `tied`; where `issued` is not known (None: main is not
    modelled), the launch's reach is not: either way a refutation must then be shown by a run."""
    main = host.externals.get("main")
    argc = z3.BitVec("argc", ARGC_BITS)
    env = _MainInputs(main if isinstance(main, MutLam) else None, argc)
    launch = Launch(None, None, host_vars={"argc": argc})
    used_argc = False
    tied = True
    objects: dict[int, int] = {}

    def encode(d: Def) -> z3.ExprRef | None:
        nonlocal used_argc
        if _grows_a_nat(d):
            return None
        try:
            enc = bv.encode(d, env)
        except (bv.NoSemantics, KeyError, AssertionError):
            return None
        if not isinstance(enc.value, z3.ExprRef):
            return None
        used_argc = used_argc or any(str(v) == "argc" for v in z3t.free_vars(enc.value)) \
            if not z3.is_bv_value(z3.simplify(enc.value)) else used_argc
        launch.constraints.append(z3t.Not(enc.ub))  # a launch the host reaches without undefined behaviour
        return enc.value

    def tie(value: Any, d: Def) -> None:
        nonlocal tied
        if isinstance(value, Ptr):
            alloc = _allocation(d)
            if alloc is None:
                tied = False
                return
            k = objects.setdefault(alloc.gid, FIRST_HOST_OBJ + len(objects))
            launch.objects[k] = f"the allocation at {alloc.loc}" if alloc.loc else "an allocation the host made"
            launch.constraints += [cast(z3.BoolRef, value.obj == z3.BitVecVal(k, OBJ_BITS)),
                                   cast(z3.BoolRef, value.off == 0)]
            return
        if isinstance(value, tuple):
            for v, c in zip(value, _components(host, d, len(value))):
                tie(v, c)
            return
        e = encode(d)
        if e is None or not isinstance(value, z3.BitVecRef) or e.sort() != value.sort():
            tied = False
            return
        launch.constraints.append(cast(z3.BoolRef, value == e))

    tie(inp.args, site.args)
    n_groups, n_items = _components(host, site.config, 5)[:2]
    for which, d in (("n_groups", n_groups), ("n_items", n_items)):
        e = encode(d)
        if e is None:
            tied = False
        elif which == "n_groups":
            launch.n_groups = cast(z3.BitVecRef, e)  # a launch size: an integer
        else:
            launch.n_items = cast(z3.BitVecRef, e)
    if issued is not None:
        names = {str(v) for v in z3t.free_vars(issued)}
        if names - {"argc"}:
            tied = False
        used_argc = used_argc or "argc" in names
        launch.constraints.append(issued)
    # argc ≥ 1: the program's name is always argv[0].
    launch.constraints.append(argc >= 1)
    launch.tied = tied
    launch.reach_known = issued is not None
    if not used_argc:
        launch.host_vars = {}
    return launch


def bind_from_paths(occurrences: list[tuple[z3.BoolRef, Any, tuple[Any, Any]]], inp: KernelInputs,
                    argc: z3.BitVecRef) -> Launch | None:
    """The launch's constraints from main's symbolic paths (kernel_streams.HostRun.launch_values):
    the launch is one of the times main issues it, each with its path's decisions, arguments and
    sizes. This ties what `bind_launch` cannot read off the expression — an argument main keeps
    in a host cell and loads back, or passes to a join's parameter — wherever every path
    computes it from argc alone. None where one depends on more (a value the host model does
    not know, argv's contents) or does not fit the kernel's parameters."""
    names: set[str] = set()
    objects: dict[int, str] = {}
    size_vars: dict[int, z3.BitVecRef] = {}  # the launch's n_groups and n_items, whichever path issues it
    disjuncts: list[z3.BoolRef] = []
    for cond, args, sizes in occurrences:
        eqs: list[z3.BoolRef] = [cond]
        names |= {str(v) for v in z3t.free_vars(cond)}
        if not _equate(inp.args, args, eqs, objects, names):
            return None
        for k, size in enumerate(sizes):
            if not isinstance(size, z3.BitVecRef):
                return None
            var = size_vars.setdefault(k, z3.BitVec(("launch_n_groups", "launch_n_items")[k], size.size()))
            if var.size() != size.size():
                return None
            names |= {str(v) for v in z3t.free_vars(size)}
            eqs.append(cast(z3.BoolRef, var == size))
        disjuncts.append(z3t.And(*eqs))
    if names - {"argc"}:
        return None
    launch = Launch(size_vars.get(0), size_vars.get(1), [z3t.Or(*disjuncts), argc >= 1], tied=True,
                    reach_known=True, objects=objects)
    if "argc" in names:
        launch.host_vars = {"argc": argc}
    return launch


def _equate(kv: Any, hv: Any, eqs: list[z3.BoolRef], objects: dict[int, str], names: set[str]) -> bool:
    """Equations of the kernel's argument value kv with the host's hv (the variables hv
    mentions into `names`); False where their shapes differ."""
    if isinstance(kv, Ptr):
        if not isinstance(hv, Ptr) or hv.space != kv.space:
            return False
        obj = z3.simplify(hv.obj)
        if z3.is_bv_value(obj):
            objects[cast(z3.BitVecNumRef, obj).as_long()] = hv.label
        names.update(str(v) for part in (hv.obj, hv.off) for v in z3t.free_vars(part))
        eqs += [cast(z3.BoolRef, kv.obj == hv.obj), cast(z3.BoolRef, kv.off == hv.off)]
        return True
    if isinstance(kv, tuple):
        return isinstance(hv, tuple) and len(hv) == len(kv) \
            and all(_equate(x, y, eqs, objects, names) for x, y in zip(kv, hv))
    if isinstance(kv, z3.BitVecRef) and isinstance(hv, z3.BitVecRef) and kv.sort() == hv.sort():
        names.update(str(v) for v in z3t.free_vars(hv))
        eqs.append(cast(z3.BoolRef, kv == hv))
        return True
    return False
