"""The two checker phases of the gpu plugin: `gpu.check_addr_spaces_repl` and `gpu.mem_checks`.

A checker returns the program unchanged or rejects it, with upstream MimIR's messages. An
address space that is not a literal is a violation when some value of it is (the smt
specification finds that value); the checker itself reports any non-literal address space in
a forbidden position with the operation's location.
"""
from __future__ import annotations

from verimim.diagnostics import Diagnostic, Loc, Related
from verimim.ir.analysis import apps_with_head
from verimim.ir.defs import App, Def, Lit, MutLam, Pi, Sigma
from verimim.ir.world import World
from verimim.printer import show
from verimim.phases.base import Phase, PhaseResult, Program, apps_of, type_and_space

# (operation, forbidden address spaces, how upstream words it)
ADDR_SPACE_RULES: list[tuple[str, frozenset[int], str]] = [
    ("mem.malloc", frozenset({3, 4, 5}), "`mem.malloc` cannot be used in address space"),
    ("mem.free", frozenset({3, 4, 5}), "`mem.free` cannot be used in address space"),
    ("mem.mslot", frozenset({1, 4}), "`mem.mslot` cannot be used in address space"),
    ("mem.slot", frozenset({1, 4}), "`mem.slot` cannot be used in address space"),
    ("mem.store", frozenset({4}), "`mem.store` cannot be used in address space"),
]


def address_space_of(app: App, world: World) -> Def:
    """The address-space argument of a mem operation: the `a` of its first argument `(T, a)`."""
    return type_and_space(world, app.args()[0])[1]


class CheckAddrSpaces(Phase):
    name = "gpu.check_addr_spaces_repl"

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        for world in prog.worlds():
            for op, bad, words in ADDR_SPACE_RULES:
                for app in apps_of(world, op, 2):
                    a = address_space_of(app, world)
                    if isinstance(a, Lit):
                        if a.value in bad:
                            res.diagnostics.append(Diagnostic(
                                "E-ADDR-SPACE", f"{words} {a.value}: `{show(app)}`", app.loc))
                        continue
                    value = _violating_value(a, bad)
                    if value is not None:  # reported with a value of it that violates (PHASES.md)
                        res.diagnostics.append(Diagnostic(
                            "E-ADDR-SPACE", f"{words} `{show(a)}`, which is not a literal and {value}: "
                            f"`{show(app)}`", app.loc))
        return res


SPACE_QUERY_MS = 2000  # (no answer in time: the space is taken to be possibly forbidden)


def _violating_value(space: Def, bad: frozenset[int]) -> str | None:
    """How a symbolic address space can be a forbidden one ("may be 4"), or None when no value
    it can take is, in the interpreter or on a target (`core.bitcast Nat b` of a Bool is 0 or 1;
    `2·a + 3` is odd; `a + 5` is 4 on a target, where Nat wraps at 2^64): Z3 decides over the
    term's unknowns. (Imported here: the GPU runtime runs this phase on a machine without z3,
    where a symbolic space is taken to be possibly forbidden.)"""
    try:
        import z3

        from verimim.smt import z3_typed as z3t
        from verimim.smt.nat_terms import NatMeanings
    except ImportError:
        return f"may be {min(bad)} (no Z3 here to decide which values it can take)"
    nats = NatMeanings()
    forbidden = sorted(bad)
    s = z3.Solver()
    s.set("timeout", SPACE_QUERY_MS)
    violation = nats.either(lambda t: z3t.Or(*[t == k for k in forbidden]), space)
    s.add(violation, *nats.facts)  # (the facts of the unknowns the term made)
    r = s.check()
    if r == z3.unsat:
        return None
    if r == z3.sat:
        model = s.model()
        values = [model.eval(m.term(space), model_completion=True) for m in nats.meanings]
        hit = next((v for v in values if isinstance(v, z3.IntNumRef) and v.as_long() in bad), values[0])
        return f"may be {hit}"
    return f"may be one of {', '.join(map(str, sorted(bad)))} (Z3 gave no answer in {SPACE_QUERY_MS} ms)"


def mem_types_in(world: World, t: Def) -> list[Def]:
    """The `mem.M n` types occurring in type t."""
    return apps_with_head(t, "mem.M")


def _argument_place(args: Def, launch: App) -> tuple[Loc | None, tuple[Related, ...]]:
    """Where a launch's kernel arguments cross: as written in the launch where they are (a tuple
    written there), else at the launch, with where the value is made (a `let`, a continuation's
    declaration) as a note: a node's own place is where it is made, not where it is passed."""
    at, made = launch.loc, args.loc
    if made is None or at is None:
        return made or at, ()
    if made.file == at.file and made.line == at.line and made.col > at.col:
        return made, ()
    return at, (Related(f"`{show(args)}` is made here", made),)


def launch_crossings(world: World) -> list[Diagnostic]:
    """E-MEM-CROSSING for each launch whose kernel arguments' type holds a `mem.M`. Also asked
    by `gpu.split_apply`, after specialisation: a launch in a generic function (`go (T: *, …,
    x: T)` launching `k x`) passes a `mem.M` only once `T` is known."""
    out: list[Diagnostic] = []
    for app in apps_of(world, "gpu.launch", 4):
        kernel, args = app.args()[2], app.args()[3]
        t = world.type_of(args)
        if mem_types_in(world, t):
            kname = kernel.name if isinstance(kernel, MutLam) else show(kernel)
            loc, related = _argument_place(args, app)
            out.append(Diagnostic(
                "E-MEM-CROSSING", f"`mem.M` must not be passed across device boundaries: "
                f"`{show(args)}` of type `{show(t)}` is passed from host to kernel `{kname}`",
                loc, "error", related))
    return out


class MemChecks(Phase):
    name = "gpu.mem_checks"

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        for world in prog.worlds():
            res.diagnostics.extend(launch_crossings(world))
            main = world.externals.get("main")
            if main is not None:
                self._check_main(world, main, res)
        return res

    def _check_main(self, world: World, main: MutLam, res: PhaseResult) -> None:
        # `fun main (args…): T` takes [args, return continuation]; `con main (m0, argc, argv,
        # return)` takes them flat: either way the last component is the return continuation.
        dom = main.pi.dom
        if not (isinstance(dom, Sigma) and dom.ops and isinstance(dom.ops[-1], Pi)):
            return
        args = [world.shift(op, -1) for op in dom.ops[:-1]]
        ret = world.shift(dom.ops[-1], -1)
        for m in (m for a in args for m in mem_types_in(world, a)):
            if not (isinstance(m, App) and isinstance(m.arg, Lit) and m.arg.value == 0):
                res.diagnostics.append(Diagnostic(
                    "E-MEM-CROSSING", "the `main` function must not take a `mem.M n` with a non-zero `n` "
                    f"as an argument (found `{show(m)}`)", main.loc))
        if isinstance(ret, Pi):
            for m in mem_types_in(world, ret.dom):
                if not (isinstance(m, App) and isinstance(m.arg, Lit) and m.arg.value == 0):
                    res.diagnostics.append(Diagnostic(
                        "E-MEM-CROSSING", "the `main` function must not return a `mem.M n` with a non-zero "
                        f"`n` (found `{show(m)}`)", main.loc))

