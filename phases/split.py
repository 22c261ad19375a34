"""`gpu.split_apply`: the kernels and what only they reach go to a device World.

The kernels are the continuations passed to `gpu.launch`. The device World holds each kernel
as an external under its own name, with its body and the continuations nested in it; the host
World keeps everything else, and each launch site names its kernel by a body-less external
declaration of the same name and type. Two kernels of one name (a generic kernel specialised
twice, `generic_kernel (4, 4)` and `generic_kernel (16, 16)`, as upstream's
lit/gpu/generic_kernel.mim launches it) cannot both be external under it: the second takes
the name with the first free suffix (`generic_kernel_1`). Then the host and device sub-pipelines run on their own
sides (`gpu.host_specific_phases ()` and `gpu.device_specific_phases ()`).
"""
from __future__ import annotations

from collections import Counter

from verimim.diagnostics import Diagnostic, Loc
from verimim.ir.defs import App, Axiom, Def, Lit, MutLam, Tuple
from verimim.ir.schedule import Scopes
from verimim.ir.world import World
from verimim.phases.base import Phase, PhaseResult, Program, apps_of, walk
from verimim.phases.checks import launch_crossings
from verimim.phases.kernel_captures import (Lifted, LiftedKernel, find_lifts, host_demanded, host_launch,
                                            captured_token, kernel_only_effect, lifted_pi)
from verimim.phases.repl import kernels_of
from verimim.phases.rewriter import Rewriter
from verimim.phases.witness import Split
from verimim.plug.c_lib import c_name
from verimim.plug.gpu_host_ops import HOST_OPERATIONS, in_kernel_message
from verimim.printer import show


class _HostSide(Rewriter):
    """Copies the host program, replacing each kernel by a declaration."""

    def __init__(self, old: World, names: dict[int, str], lifts: dict[int, Lifted]) -> None:
        super().__init__(old)
        self.names = names  # each kernel's external name (its gid → name)
        self.lifts = lifts

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        return host_launch(self, old, ops, self.lifts) if isinstance(old, App) else None

    def rewrite_mut(self, old: MutLam) -> Def | None:
        name = self.names.get(old.gid)
        if name is None:
            return None
        lift = self.lifts.get(old.gid)
        pi = self.rewrite(old.pi) if lift is None else lifted_pi(self, lift)
        decl = self.new.mut_lam(pi, name, old.kind)  # type: ignore[arg-type]
        decl.external = True
        decl.loc = old.loc
        decl.param_names = old.param_names
        self.new.externals[name] = decl
        return decl


class SplitApply(Phase):
    name = "gpu.split_apply"
    whole_program = True

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        if prog.device is not None:
            res.skipped = "the program is already split"
            return res
        world = prog.host
        crossings = launch_crossings(world)
        if crossings:
            # (gpu.mem_checks saw these launches before specialisation, with a type parameter
            # where the `mem.M` is now)
            res.diagnostics.extend(crossings)
            return res
        for app in apps_of(world, "gpu.launch", 3):
            if not isinstance(app.arg, MutLam):
                # A kernel chosen at run time (`(k_a, k_b)#c`) or passed in (a parameter of a
                # recursive function no phase specialised): which continuation runs on the
                # device is not known here, and saying "no kernel" would leave its launch on
                # the host.
                res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"the kernel of this launch is `{show(app.arg)}`, not a continuation named "
                    f"at the launch: `gpu.split_apply` cannot tell which one runs on the device", app.loc))
                return res
        kernels = kernels_of(world)
        names = device_names(world, kernels)
        if not kernels:
            res.skipped = "the program launches no kernel"
            return res
        # A kernel that uses host values (a curried kernel specialised at its launch) takes them
        # as extra launch arguments (verimim.phases.kernel_captures).
        scopes = Scopes()
        host_code = host_demanded(world, kernels)
        for k in kernels:
            if not scopes.free(k):
                continue
            if (op := kernel_only_effect(world, scopes, k, host_code)) is not None:
                res.diagnostics.append(_kernel_only_effect_diagnostic(world, k, op))
            elif (tok := captured_token(world, scopes, k)) is not None:
                # made a capture, it would be a launch argument holding a `mem.M` (gpu.mem_checks)
                res.diagnostics.append(Diagnostic(
                    "E-MEM-CROSSING", f"`mem.M` must not be passed across device boundaries: kernel `{k.name}` "
                    f"captures `{show(tok)}` of type `{show(world.type_of(tok))}`, a memory token of the host", k.loc))
        if res.rejected:
            return res
        lifts, why, bad = find_lifts(world, scopes, kernels, apps_of(world, "gpu.launch", 3))
        if why is not None and bad is not None:
            res.diagnostics.append(Diagnostic(
                "E-UNSUPPORTED", f"kernel `{bad.name}` uses values of an enclosing function and cannot "
                f"be made closed to run on the device: {why}", bad.loc))
            return res
        host = _HostSide(world, names, lifts).run()
        dev = Rewriter(world)
        for k in kernels:
            lift = lifts.get(k.gid)
            rw = dev if lift is None else LiftedKernel(world, dev.new, lift)
            nk = rw.rewrite(k)
            rw.finish()
            assert isinstance(nk, MutLam)
            nk.external = True
            nk.name = names[k.gid]
            dev.new.externals[names[k.gid]] = nk
        dev.finish()
        called: set[Def] = set()  # the host functions a kernel calls (each call reported)
        for annex, depth in HOST_OPERATIONS.items():
            for app in apps_of(dev.new, annex, depth):
                called.add(app.head)
                res.diagnostics.append(Diagnostic("E-UNSUPPORTED", in_kernel_message(annex), app.loc))
        for app, annex in host_memory_operations(dev.new):
            # SEMANTICS.md: device code may not dereference address space 0 (`run` stops there)
            res.diagnostics.append(Diagnostic(
                "E-ADDR-SPACE", f"kernel code {_HOST_MEMORY_VERBS[annex]} host memory (address space 0): a "
                f"kernel's memory is the device's (address spaces 1, 3, 4, 5)", app.loc))
        reached: list[Def] = []  # every host function the device World holds (a called one is reported)
        sites: dict[Def, Loc | None] = {}  # each one's first application that passes it on
        for d in walk(dev.new):
            # a C function is host code (libc): `run` and the GPU backend refuse it in a kernel
            if isinstance(d, App) and (name := c_name(d.head)) is not None:
                called.add(d.head)
                res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"a call of the C function `{name}` in a kernel: C functions run on "
                    f"the host", d.loc))
            elif isinstance(d, App):
                args = [d.callee, d.arg]  # (a partial application, then what it is applied to)
                while args:  # through the tuples that group the arguments
                    a = args.pop()
                    if _host_function(a) is not None:
                        sites.setdefault(a, d.loc)
                    args.extend(a.ops if isinstance(a, Tuple) else ())
            elif _host_function(d) is not None:
                reached.append(d)
        for f in reached:
            # passed on as a value (to a helper that may call it): code the kernel reaches, which
            # the specification's partition judges as it judges a call
            if f not in called:
                res.diagnostics.append(Diagnostic(
                    "E-UNSUPPORTED", f"{_host_function(f)} is passed as a value in a kernel: it runs on the host",
                    sites.get(f) or f.loc))
        if res.rejected:
            return res
        res.after = Program(host, dev.new)
        # the kernels' names are str: World.mut_lam names every mutable
        res.witness = Split(kernels=[names[k.gid] for k in kernels], host_nodes=sum(1 for _ in walk(host)),
                            device_nodes=sum(1 for _ in walk(dev.new)),
                            lifted_captures={names[gid]: len(lift.caps) for gid, lift in lifts.items()},
                            device_names=dict(names))
        return res


def _kernel_only_effect_diagnostic(world: World, k: MutLam, op: App) -> Diagnostic:
    """A memory operation only kernel `k` demands, on values of the host: on host memory
    (address space 0) `E-ADDR-SPACE`, as for any kernel code that touches it; else with a
    memory token the host holds, a `mem.M` crossing into the kernel (`E-MEM-CROSSING`)."""
    annex = op.head.annex if isinstance(op.head, Axiom) else None
    if annex in _HOST_MEMORY_VERBS:
        space = world.extract_n(op.args()[0], 2, 1)
        if isinstance(space, Lit) and space.value == 0:
            return Diagnostic("E-ADDR-SPACE", f"kernel code {_HOST_MEMORY_VERBS[annex]} host memory (address space 0): "
                              f"a kernel's memory is the device's (address spaces 1, 3, 4, 5)", op.loc)
    return Diagnostic("E-MEM-CROSSING", f"`mem.M` must not be passed across device boundaries: kernel `{k.name}` "
                      f"performs `{show(op)}` with a memory token of the host", op.loc)


def _host_function(d: Def) -> str | None:
    """What `d` is where it is a host-only function (a C function, an operation of the CUDA
    driver), else None."""
    if (name := c_name(d)) is not None:
        return f"the C function `{name}`"
    if isinstance(d, Axiom) and d.annex in HOST_OPERATIONS:
        return f"the host operation `{d.annex}`"
    return None


def device_names(world: World, kernels: list[MutLam]) -> dict[int, str]:
    """Each kernel's external name on both sides (by the kernel's gid): its own name where no
    other kernel or external has it, else that name with the first free suffix `_1`, `_2`, ….
    An external kernel keeps its name (the program's interface), and so does a kernel whose name
    no other has — before any suffix is chosen, so that a second `k` becomes `k_2`, not the
    `k_1` the program itself named another kernel; the others are named in the order of
    `kernels` (creation order: the first specialisation keeps the name)."""
    kernel_ids = {k.gid for k in kernels}
    taken = {name for name, m in world.externals.items() if m.gid not in kernel_ids}
    order = sorted(kernels, key=lambda k: not k.external)
    times = Counter(k.name or "kernel" for k in kernels)
    out: dict[int, str] = {}
    for k in order:
        base = k.name or "kernel"
        if (k.external or times[base] == 1) and base not in taken:
            taken.add(base)
            out[k.gid] = base
    for k in order:
        if k.gid in out:
            continue
        base = k.name or "kernel"
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        out[k.gid] = name
    return out


# The `mem` operations whose `(T, a)` names the memory they use, and what they do with it.
_HOST_MEMORY_VERBS = {"mem.load": "reads", "mem.store": "writes", "mem.free": "frees", "mem.alloc": "allocates",
                      "mem.malloc": "allocates", "mem.slot": "allocates", "mem.mslot": "allocates"}


def host_memory_operations(world: World) -> list[tuple[App, str]]:
    """The `mem` operations of `world` on address space 0 (a literal), with their annex, in
    source order. (Not named in the message: `mem.slot` is `mem.mslot` by now.)"""
    out: list[tuple[App, str]] = []
    for annex in _HOST_MEMORY_VERBS:
        for app in apps_of(world, annex, 2):
            space = world.extract_n(app.args()[0], 2, 1)  # `(T, a)`, written out or passed whole
            if isinstance(space, Lit) and space.value == 0:
                out.append((app, annex))
    return sorted(out, key=lambda x: (x[0].loc.line, x[0].loc.col) if x[0].loc else (0, 0))
