"""The reference interpreter: runs any World (before or after any phase) from `main`.

Continuations are run as a loop of jumps (constant Python stack: a loop written as a recursive
continuation runs any number of iterations). Each body is compiled once into instructions
(verimim.interp.compile). Host code is one `Thread`; a kernel launch runs one `Thread` per
work-item, group by group, switching work-items only at barriers, in an order fixed by the
schedule seed. Undefined behaviour raises a `RuntimeFault` with its code and locations;
warnings (benign races, leaks) are collected.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from verimim.diagnostics import Diagnostic, Loc, Related, VerimimError
from verimim.interp import entry
from verimim.interp.compile import SUSPEND, Code, Compiler, Env
from verimim.interp.memory import Memory
from verimim.interp.values import (
    Closure, FuelExhausted, Halt, KernelReturn, LamValue, Partial, RuntimeFault, Value, bottom_used,
)
from verimim.ir.defs import (
    App, Arr, Axiom, Def, Extract, Insert, Lit, MutLam, Pack, Sigma, Var,
)
from verimim.ir.analysis import is_var_path
from verimim.ir.schedule import Scopes
from verimim.ir.world import World
from verimim.plug.c_lib import C_PREFIX
from verimim.printer import show

DEFAULT_FUEL = 50_000_000

Semantics = dict[str, tuple[int, Any]]  # annex → (arity, the function that runs it)
# The most work-items one launch may have on the interpreter. Measured: the interpreter runs about
# 2,000 work-items of a one-store kernel per second (5 KB each), so 2**17 take about a minute and
# under a gigabyte; a bigger launch is refused up front, pointing to --target gpu.
DEFAULT_MAX_WORK_ITEMS = 1 << 17


@dataclass
class Thread:
    """A host program or one work-item: where it is (code, pc, frame, env) or where it jumps next."""

    name: str
    device: bool = False
    group: int = 0
    item: int = 0
    launch: Any = None  # the LaunchState of the kernel this work-item belongs to
    next: tuple[Value, Value] | None = None
    code: Code | None = None
    pc: int = 0
    frame: list[Value] = field(default_factory=list)
    env: Env = field(default_factory=dict)
    barrier_node: Def | None = None
    jump: Def | None = None  # the jump that produced `next` (for locations)
    barrier_result: Value = None
    result: Value = None
    done: bool = False
    end: Def | None = None  # the jump by which it finished (a work-item's `return`)
    machine: Any = None  # the Machine running it (set by Machine.run_thread): what instructions call
    # The activations of functions (mutables whose last parameter is a continuation: `fun`,
    # `con f (…, return: Cn …)`) not yet returned, innermost last, and how many have each return
    # continuation (by id: an activation holds its continuation alive).
    calls: list[Activation] = field(default_factory=list)
    returns: dict[int, int] = field(default_factory=dict)
    # The continuation that ends this thread (main's `return`, a work-item's, a direct-style
    # call's own): a jump to another one leaves the thread for the thread it ends (Escape).
    halt: Halt | KernelReturn | None = None


class Escape(Exception):
    """A jump, from a direct-style call (`direct.cps2ds`, run on a thread of its own), to the
    continuation that ends an enclosing thread (an outer function's `return`, main's, a
    work-item's): as upstream cuts the caller at the call, the rest of the caller never runs and
    that thread goes on with the jump. Raised through the nested runs to the thread the
    continuation ends."""

    def __init__(self, halt: Halt | KernelReturn, arg: Value, jump: Def | None) -> None:
        super().__init__("escape")
        self.halt, self.arg, self.jump = halt, arg, jump


class Activation:
    """A function's run from its call to the jump to its return continuation: the stack blocks
    (`mem.slot`) made meanwhile live until then (SEMANTICS.md)."""

    __slots__ = ("ret", "name", "blocks", "site", "defined")

    def __init__(self, ret: Value, name: str, site: Loc | None = None, defined: Loc | None = None) -> None:
        self.ret = ret
        self.name = name
        self.blocks: list[Any] = []
        self.site = site  # the call
        self.defined = defined  # where the called function is written


def _scopes_of(world: World) -> Scopes:
    """The nesting analysis of a World's mutables, shared by every Machine that runs it and kept
    with it (World.kept): it depends only on the World (nodes never change, a mutable's body is
    set once), and the fuzz oracle and the differential specs run one World many times
    (schedules, argument vectors, phases)."""
    return world.keep("interp.scopes", lambda: Scopes(world))


class _Registry:
    """The operation semantics and axiom values the plugins register, recorded once per process:
    a Machine starts from a copy (registering makes some 150 closures), and Machines whose
    operations have these arities and whose axiom values are these share their compiled code
    (kept with the World, `World.kept`), whatever functions their semantics are (wrapped to
    trace effects, or to run on the GPU)."""

    def __init__(self) -> None:
        self.semantics: Semantics = {}
        self.values: dict[str, Value] = {}
        self._arities: dict[str, int] | None = None

    @property
    def arities(self) -> dict[str, int]:
        if self._arities is None:
            self._arities = arities_of(self.semantics)
        return self._arities

    def register(self, annex: str, arity: int, fn: Any) -> None:
        self.semantics[annex] = (arity, fn)

    def register_value(self, annex: str, value: Value) -> None:
        self.values[annex] = value


def arities_of(semantics: Semantics) -> dict[str, int]:
    return {annex: arity for annex, (arity, _) in semantics.items()}


_STANDARD: _Registry | None = None
_STANDARD_LOCK = threading.Lock()  # a Dask worker may start Machines on several threads


def _standard() -> _Registry:
    global _STANDARD
    if _STANDARD is not None:
        return _STANDARD
    with _STANDARD_LOCK:
        if _STANDARD is None:
            from verimim.plug import btensor_interp, buffer_interp, core_interp, direct_interp, gpu_interp, mem_interp

            reg = _Registry()
            for mod in (core_interp, mem_interp, gpu_interp, buffer_interp, btensor_interp, direct_interp):
                mod.register(reg)  # type: ignore[arg-type]  # registering needs only these two methods
            _STANDARD = reg
    return _STANDARD


class Machine:
    def __init__(self, world: World, fuel: int = DEFAULT_FUEL, seed: int = 0,
                 device: World | None = None, max_work_items: int = DEFAULT_MAX_WORK_ITEMS) -> None:
        self.world = world
        self.device = device  # after split_apply: the World holding the kernels' bodies
        self.fuel = fuel
        self.max_work_items = max_work_items  # per launch, refused before it starts (gpu_interp)
        self.steps = 0
        self.rng = random.Random(seed)
        self.seed = seed
        self.memory = Memory()
        self.warnings: list[Diagnostic] = []
        std = _standard()
        self.semantics: Semantics = dict(std.semantics)
        self.values: dict[str, Value] = dict(std.values)
        self.codes: dict[int, Code] = {}  # this machine's view of its compilers' codes
        self.scopes = _scopes_of(world)
        self._compilers: dict[int, Compiler] = {}  # by World serial: the host's and the device's
        self.call_depth = 0  # nested direct-style calls (call_value)
        self._lam_bodies: set[Def] = set()  # bodies of the mutables made by lam_activation
        self.state: dict[str, Any] = {}  # per-plugin run-time state (the GPU session, streams)
        self.stdout = bytearray()  # what the program's C functions printed (verimim.plug.c_interp)

    # ------------------------------------------------------------------ registration

    def register(self, annex: str, arity: int, fn: Any) -> None:
        self.semantics[annex] = (arity, fn)

    def register_value(self, annex: str, value: Value) -> None:
        self.values[annex] = value

    def warn(self, code: str, message: str, loc: Loc | None, related: tuple[Any, ...] = ()) -> None:
        self.warnings.append(Diagnostic(code, message, loc, "warning", related))

    # ------------------------------------------------------------------ stepping

    def tick(self, th: Thread) -> None:
        self.steps += 1
        if self.steps > self.fuel:
            raise FuelExhausted(self.fuel, None)

    def resolve(self, mut: MutLam) -> MutLam:
        """A body-less external (a kernel declared on the host) resolved in the device World."""
        if mut.body is None and mut.external and self.device is not None:
            target = self.device.externals.get(mut.name or "")
            if target is not None and target.body is not None:
                return target
        return mut

    def world_of(self, d: Def) -> World:
        """The World that made `d`: the device World for a kernel's nodes after split_apply, else
        the host's. What the interpreter builds at run time from a node (a β-reduction, a
        reified value, an extract of a type) it builds there, so types compare by identity."""
        dev = self.device
        return dev if dev is not None and d.home == dev.serial else self.world

    def compiler_for(self, d: Def) -> Compiler:
        """The compiler of the World that made `d`: shared with every Machine that runs that World
        with the standard operations (once this machine's are checked to be those: the same
        annexes and arities, the same axiom values) and kept with the World (World.kept; the
        Compiler holds the World weakly), else this machine's own (a test's own operations)."""
        w = self.world_of(d)
        hit = self._compilers.get(w.serial)
        if hit is not None:
            return hit
        std = _standard()
        arities = arities_of(self.semantics)
        if arities == std.arities and self.values == std.values:
            hit = w.keep("interp.compiler", lambda: Compiler(w, _scopes_of(w), std.arities, std.values))
        else:
            hit = Compiler(w, _scopes_of(w), arities, dict(self.values))
        self._compilers[w.serial] = hit
        return hit

    def code_of(self, mut: MutLam) -> Code:
        hit = self.codes.get(mut.gid)
        if hit is None:
            hit = self.codes[mut.gid] = self.compiler_for(mut).code_of(mut)
        return hit

    def run_thread(self, th: Thread) -> str:
        """Run until the thread finishes ("done") or stops at a barrier ("barrier")."""
        th.machine = self
        while True:
            code = th.code
            if code is None:
                if th.next is None:
                    raise RuntimeFault("E-INTERNAL", "a thread with nowhere to go", None)
                callee, arg = th.next
                th.next = None
                if not self.enter(th, callee, arg):
                    return "done"
                continue
            instrs = code.instrs
            fr, env = th.frame, th.env
            pc = th.pc
            n = len(instrs)
            while pc < n:
                try:
                    r = instrs[pc](fr, env, th)
                except Escape as e:
                    if e.halt is not th.halt:
                        raise  # (a thread further out ends by it)
                    # the rest of this block never runs: the thread ends with the escaping jump
                    th.next, th.jump, th.code = (e.halt, e.arg), e.jump, None
                    break
                except KeyError:
                    if code.root not in self._lam_bodies:
                        raise
                    # A `lam` branch target run as a mutable (lam_closure) that reads a value its
                    # creator computed, which the closure does not carry.
                    raise RuntimeFault("E-UNSUPPORTED", "a `lam` used as a branch target that uses values "
                                       "its creator computed", getattr(code.root, "loc", None)) from None
                pc += 1
                if r is SUSPEND:
                    th.pc = pc
                    return "barrier"
            if th.code is None:
                continue  # (an escape ended the block: its jump is next)
            self.steps += n + 1  # the jump is a step too: a loop whose body is only a jump still ends
            if self.steps > self.fuel:
                # Located at the jump that ends this body: in a runaway loop, the loop's back edge.
                raise FuelExhausted(self.fuel, getattr(code.root, "loc", None))
            assert code.callee is not None
            th.next = (code.callee(fr, env), code.result(fr, env))
            th.jump = code.root
            th.code = None

    def enter(self, th: Thread, callee: Value, arg: Value) -> bool:
        """Jump to `callee` with `arg`; False when the thread has finished."""
        if th.returns and id(callee) in th.returns:
            self._return_to(th, callee)
        if isinstance(callee, Closure):
            mut = self.resolve(callee.mut)
            code = self.code_of(mut)
            if code.ret_at is not None and isinstance(arg, tuple):
                self._call(th, arg[code.ret_at], mut)
            env = dict(callee.env)
            env[-mut.gid] = arg
            env[mut.gid] = callee  # a continuation may jump to itself
            th.code, th.pc, th.env = code, 0, env
            fr: list[Value] = [None] * code.nslots
            for slot, m in code.premade:
                fr[slot] = Closure(m, {})
            th.frame = fr
            return True
        if isinstance(callee, LamValue):
            # A `lam` used as a branch target: its body is a jump, run like a continuation's.
            code, env = self.lam_activation(callee, arg, jump=True)
            th.code, th.pc, th.env = code, 0, env
            th.frame = self._fresh_frame(code)
            return True
        if isinstance(callee, (Halt, KernelReturn)):
            if th.halt is not None and callee is not th.halt:
                raise Escape(callee, arg, th.jump)
            th.result = arg
            th.done = True
            th.end = th.jump
            return False
        if isinstance(callee, Partial) and not callee.args and callee.axiom.annex.startswith(C_PREFIX):
            # A call of a C function (`ccon`/`cfun`): run its semantics, continue with its
            # continuation.
            from verimim.plug import c_interp

            self.tick(th)
            th.next = c_interp.jump(self, th, callee.axiom, arg, th.jump if isinstance(th.jump, App) else None)
            return True
        if isinstance(callee, Partial):
            # A jump to an `Fn`-typed axiom (`gpu.launch … $ (…)`): run it, continue with its
            # continuation.
            arity, fn = self.semantics.get(callee.axiom.annex, (None, None))
            if fn is None or arity != len(callee.args) + 1:
                raise RuntimeFault("E-UNSUPPORTED", f"cannot jump to `{callee.axiom.annex}`", None)
            value, k = arg
            self.tick(th)
            site = th.jump.callee if isinstance(th.jump, App) else None
            th.next = (k, fn(self, th, list(callee.args) + [value], site))
            return True
        at = th.jump.loc if isinstance(th.jump, App) else None
        if callee is None:  # ⊥ called: computing with it (docs/semantics.md)
            raise bottom_used("a call (the function it calls)", at)
        raise RuntimeFault("E-INTERNAL", f"jump to a non-continuation {callee!r}", at)

    def _call(self, th: Thread, ret: Value, mut: MutLam) -> None:
        """A function starts. A tail call (its return continuation is the caller's) continues the
        caller's activation: the callee returns where the caller does, and a loop written as
        tail recursion keeps one activation."""
        calls = th.calls
        if calls and calls[-1].ret is ret:
            return
        calls.append(Activation(ret, mut.name or "λ", getattr(th.jump, "loc", None), mut.loc))
        th.returns[id(ret)] = th.returns.get(id(ret), 0) + 1

    def _return_to(self, th: Thread, ret: Value) -> None:
        """A jump to the return continuation of a running function: that activation, and every
        one started after it (which can no longer return), end with their stack blocks."""
        where = getattr(th.jump, "loc", None)
        key, returns, calls = id(ret), th.returns, th.calls
        while key in returns:
            act = calls.pop()
            k = id(act.ret)
            if returns[k] == 1:
                del returns[k]
            else:
                returns[k] -= 1
            for b in act.blocks:
                if not th.device and b.space == 0 and b.live and "gpu" in self.state:
                    # A host slot ends under pending `.asyn` work on it as `mem.free` ends a block
                    # (SEMANTICS.md, Streams): the copy would write, or read, a dead frame.
                    from verimim.plug import gpu_interp

                    gpu_interp.host_access(self, b, 0, b.size, True, where,
                                           f"the end of a slot of `{act.name}` (its function returned)")
                self.memory.end(b, where, f"its function `{act.name}` returned")

    # ------------------------------------------------------------------ values

    def _fresh_frame(self, code: Code) -> list[Value]:
        fr: list[Value] = [None] * code.nslots
        for slot, m in code.premade:
            fr[slot] = Closure(m, {})
        return fr

    def lam_captures(self, v: LamValue) -> dict[int, Value]:
        """The nodes of the lambda's body that the activation which made it has at hand (in its
        environment or its frame), by id: a call reads them instead of computing them again, so
        an effect or a fault among them happens once, where the program put it."""
        hit = v.captures
        if hit is not None:
            return hit
        out: dict[int, Value] = {}
        seen: set[int] = set()
        stack: list[Def] = [v.lam.body]
        while stack:
            x = stack.pop()
            if x.gid in seen or isinstance(x, (Var, Lit, Axiom)):
                continue
            seen.add(x.gid)
            if x.bvd == 0:  # only a node closed under the lambda's binder can be its creator's
                if x.gid in v.slots:
                    out[x.gid] = v.frame[v.slots[x.gid]]
                    continue
                if x.gid in v.env:
                    out[x.gid] = v.env[x.gid]
                    continue
            if isinstance(x, MutLam):
                # A closure this body makes itself: what it captures (verimim.ir.schedule's
                # Scopes.avail) the body must provide, so look there too — else the body would
                # compute it again, repeating its effects.
                if x.annex is None:
                    c = self.compiler_for(x)
                    stack.extend(c.scopes.avail(x, c.is_leaf).values())
                continue
            stack.extend(x.ops)
        v.captures = out
        return out

    def lam_activation(self, v: LamValue, arg: Value, jump: bool) -> tuple[Code, Env]:
        """Code and environment to run an immutable lambda's body with `arg` as the body of an
        equivalent mutable (made once per lambda; code once per set of captured nodes)."""
        mut = self.world_of(v.lam).lam_as_mut(v.lam)
        assert mut.body is not None
        self._lam_bodies.add(mut.body)
        caps = self.lam_captures(v)
        key = (mut.gid, jump, frozenset(caps))
        comp = self.compiler_for(mut)
        code = comp.lam_codes.get(key)
        if code is None:
            code = comp.lam_codes[key] = comp.compile(mut.body, jump=jump, preset=key[2])
        env = {**v.env, **caps}
        env[-mut.gid] = arg
        return code, env

    def extract_value(self, t: Value, i: Value, node: Extract) -> Value:
        if i is None:
            raise bottom_used("the index of an extract (a branch, when it selects a continuation)", node.loc)
        if t is None:
            return None  # an element of ⊥ is ⊥
        if isinstance(i, tuple):
            # a multi-index (`a#i` with i of type `«j: r; Idx s#j»`): one element per component,
            # as the World folds `a#(i, j)` to `a#i#j`
            for c in i:
                t = self.extract_value(t, c, node)
            return t
        if isinstance(t, tuple):
            try:  # (a hot path: no test before the access)
                return t[i]
            except IndexError:  # an index of unknown range (`core.idx_unsafe`)
                raise RuntimeFault("E-OOB", f"index {i} into a tuple of {len(t)} elements", node.loc) from None
        if isinstance(t, Def):
            w = self.world_of(node)
            idx = i if isinstance(i, Def) else self.reify(i, w.type_of(node.index) if node.index.bvd == 0 else None, w)
            return w.extract(t, idx)
        if i == 0:
            return t  # an array of a run-time arity of one is its element (`«1; T» = T`)
        raise RuntimeFault("E-OOB", f"index {i} into a value of one element", node.loc)

    def insert_value(self, t: Value, i: Value, v: Value, node: Insert) -> Value:
        if i is None:
            raise bottom_used("the index of an insert", node.loc)
        if not isinstance(t, tuple):
            if i == 0:
                return v  # a value of one element (`«1; T» = T`) is replaced whole
            raise RuntimeFault("E-OOB", f"index {i} into a value of one element", node.loc)
        if not 0 <= i < len(t):
            raise RuntimeFault("E-OOB", f"index {i} into a tuple of {len(t)} elements", node.loc)
        return (*t[:i], v, *t[i + 1:])

    def call_value(self, callee: Value, arg: Value, node: App, th: Thread) -> Value:
        """A direct-style call of a `lam` (not a jump): run its body to its value."""
        if isinstance(callee, Closure):
            code = self.code_of(callee.mut)
            if code.callee is not None:
                raise RuntimeFault("E-UNSUPPORTED", f"`{callee.mut.name}` is a continuation used as a value", node.loc)
            env = dict(callee.env)
            env[-callee.mut.gid] = arg
            env[callee.mut.gid] = callee
            return self._run_for_value(code, env, callee.mut.name or "λ", node, th, callee.mut.loc)
        if isinstance(callee, LamValue):
            lam = callee.lam
            try:
                w = self.world_of(lam)
                body = w.app(lam, self.reify(arg, lam.pi.dom, w))
            except RuntimeFault:
                # A run-time value that is no IR (a memory token, a pointer): run the lambda as
                # a mutable with the same body instead of substituting.
                code, env = self.lam_activation(callee, arg, jump=False)
                return self._run_for_value(code, env, lam.name or "λ", node, th)
            return self.eval_expr(body, callee.env, th, self.lam_captures(callee))
        if isinstance(callee, Partial):
            arity, fn = self.semantics[callee.axiom.annex]
            args = list(callee.args) + [arg]
            if len(args) < arity:
                return Partial(callee.axiom, tuple(args))
            return fn(self, th, args, node)
        raise RuntimeFault("E-UNSUPPORTED", f"cannot call {callee!r}", node.loc)

    def _run_for_value(self, code: Code, env: Env, name: str, node: App, th: Thread,
                       loc: Loc | None = None) -> Value:
        sub = Thread(f"{th.name}/{name}", th.device, th.group, th.item, th.launch, machine=self)
        sub.code, sub.env, sub.frame = code, env, self._fresh_frame(code)
        # Direct-style recursion never reaches the jump that counts a body's steps, and each
        # level holds a Python frame: count before running, and bound the depth.
        self.steps += len(code.instrs)
        self.call_depth += 1
        if self.steps > self.fuel or self.call_depth > MAX_CALL_DEPTH:
            self.call_depth = 0
            raise FuelExhausted(self.fuel, node.loc or loc)
        for ins in code.instrs:
            if ins(sub.frame, env, sub) is SUSPEND:
                raise RuntimeFault("E-UNSUPPORTED", "a barrier inside a function called for its "
                                   "value", node.loc)
        self.call_depth -= 1
        return code.result(sub.frame, env)

    def eval_expr(self, d: Def, env: Env, th: Thread, known: dict[int, Value] | None = None) -> Value:
        """Evaluate a closed-but-for-Vars expression (the slow path: packs, immutable lambdas);
        `known` holds values of nodes the enclosing frame computed already."""
        preset = frozenset(known) if known else frozenset()
        key = (d.gid, preset)
        comp = self.compiler_for(d)
        code = comp.expr_codes.get(key)
        if code is None:
            code = comp.expr_codes[key] = comp.compile(d, jump=False, preset=preset)
        if known:
            env = {**env, **known}
        fr: list[Value] = [None] * code.nslots
        for slot, mm in code.premade:
            fr[slot] = Closure(mm, {})
        for ins in code.instrs:
            if ins(fr, env, th) is SUSPEND:
                raise RuntimeFault("E-UNSUPPORTED", "a barrier inside an expression evaluated for its value", d.loc)
        self.steps += len(code.instrs)
        return code.result(fr, env)

    def eval_pack(self, d: Pack, env: Env, th: Thread, known: dict[int, Value]) -> Value:
        shape = d.shape
        n = shape.value if isinstance(shape, Lit) else known.get(shape.gid)
        if n is None and not isinstance(shape, Lit):
            # a shape computed from parameters the frame did not compute (`‹n; x›` in the inner
            # `con` of `con mk (n: Nat) (x: I32, …)`: n is the outer one's, in the environment)
            try:
                n = self.eval_expr(shape, env, th, known)
            except KeyError:  # a parameter this activation does not hold: not evaluated here
                n = None
        if not isinstance(n, int):
            raise RuntimeFault("E-UNSUPPORTED", f"a pack of shape `{show(shape)}`", d.loc)
        if d.body.bvd == 0:
            v = self.eval_expr(d.body, env, th, known)
            return tuple(v for _ in range(n))
        w = self.world_of(d)
        return tuple(self.eval_expr(w.open(d.body, w.lit_idx(n, j)), env, th, known) for j in range(n))

    # ------------------------------------------------------------------ type-level values

    def static(self, v: Value, w: World | None = None) -> Def:
        """A type-level value as one IR node (a run-time tuple of types becomes a tuple node),
        in World w (default: the World of its first node, else the host's)."""
        if isinstance(v, Def):
            return v
        if isinstance(v, tuple):
            w = w or next((self.world_of(x) for x in v if isinstance(x, Def)), self.world)
            return w.tuple(self.static(x, w) for x in v)
        return self.reify(v, None, w)

    def reify(self, v: Value, t: Def | None, w: World | None = None) -> Def:
        """A run-time value as an IR node (for type-level computation), in World w (default:
        the World of its type, else the host's)."""
        if w is None:
            w = self.world_of(t) if t is not None else self.world
        if isinstance(v, Def):
            return v
        if isinstance(v, bool) or isinstance(v, int):
            if t is None:
                return w.lit_nat(int(v))
            return w.lit(t, int(v))
        if isinstance(v, tuple):
            if t is None:
                return w.tuple(self.reify(x, None, w) for x in v)
            fields: list[Def] = []
            if isinstance(t, Sigma):
                partial: list[Def] = []
                for j, x in enumerate(v):
                    ft = w.open(t.ops[j], w.tuple(partial + [w.hole(None, "_")] * (len(v) - j)))
                    partial.append(self.reify(x, ft, w))
                return w.tuple(partial)
            if isinstance(t, Arr):
                for j, x in enumerate(v):
                    fields.append(self.reify(x, w.open(t.body, w.lit_idx(len(v), j)), w))
                return w.tuple(fields)
            return w.tuple(self.reify(x, None, w) for x in v)
        raise RuntimeFault("E-UNSUPPORTED", f"a run-time value {v!r} used in a type", None)

    def substitute(self, d: Def, env: Env) -> Def:
        """The type-level node `d` with the run-time values of the parameters it mentions."""
        has_var = self.compiler_for(d).has_var
        if not has_var(d):
            return d
        w = self.world_of(d)
        memo: dict[int, Def] = {}

        def go(x: Def) -> Def:
            if not has_var(x):
                return x
            hit = memo.get(x.gid)
            if hit is not None:
                return hit
            if isinstance(x, Var):
                res = self.reify(env[-x.mut.gid], x.mut.pi.dom, w)
            elif x.gid in env:  # a value the frame computed (a length loaded from memory)
                res = self.reify(env[x.gid], w.type_of(x) if x.bvd == 0 else None, w)
            elif isinstance(x, Extract) and is_var_path(x):
                res = self._reify_path(x, env)
            else:
                ops = tuple(go(op) for op in x.ops)
                res = x.rebuild(w, ops)
            memo[x.gid] = res
            return res

        return go(d)

    def _reify_path(self, x: Extract, env: Env) -> Def:
        """`Var#i#j` reified from just that component of the parameter's value."""
        path: list[int] = []
        y: Def = x
        while isinstance(y, Extract):
            assert isinstance(y.index, Lit)
            path.append(y.index.value)
            y = y.tup
        assert isinstance(y, Var)
        v = env[-y.mut.gid]
        for i in reversed(path):
            v = v[i]
        w = self.world_of(x)
        t = w.type_of(x) if x.bvd == 0 else None
        if t is not None and self.compiler_for(t).has_var(t):
            t = self.substitute(t, env)
        return self.reify(v, t, w)

    # ------------------------------------------------------------------ programs

    def run_main(self, main: MutLam, args: list[str]) -> int:
        """Run `main` (in any of its forms: verimim.interp.entry) with C's argc/argv and return
        its I32 result as a signed integer."""
        from verimim.plug import gpu_interp, mem_interp

        th = Thread("host")
        try:
            form = entry.main_form(main)
        except VerimimError as e:
            raise RuntimeFault(e.code, e.message, e.loc) from None
        leaves: list[Value] = [len(args) % 2**32, mem_interp.make_argv(self, args)] if form.takes_args else []
        th.halt = Halt()
        th.next = (Closure(main, {}), entry.build(form.dom, iter(leaves), th.halt))
        try:
            status = self.run_thread(th)
        except RuntimeFault as e:
            _note_call_site(e, th)
            raise
        except Escape as e:
            # the continuation of a direct-style call that has returned: its thread is gone
            raise RuntimeFault("E-UNSUPPORTED", "a jump to the continuation of a direct-style call "
                               "(`direct.cps2ds`) that has already returned", getattr(e.jump, "loc", None)) from None
        if status != "done":
            raise RuntimeFault("E-BARRIER-DIVERGENCE", "a barrier outside of any kernel", None)
        out: list[Value] = []
        entry.flatten(form.ret_type, th.result, out)
        # located at the jump that returned it (the `return …` with the ⊥), else at main
        at = getattr(th.end, "loc", None) or main.loc
        if len(out) == 1 and out[0] is None:
            raise bottom_used("`main`'s result", at)
        if len(out) != 1 or not isinstance(out[0], int):
            raise RuntimeFault("E-TYPE", f"`main` returned {th.result!r}, not `{show(form.ret_type)}`", main.loc)
        gpu_interp.at_exit(self, main)
        mem_interp.at_exit(self, main)
        v = out[0] % 2**32
        return v - 2**32 if v >= 2**31 else v


def _note_call_site(e: RuntimeFault, th: Thread) -> None:
    """A fault inside a plugin's own code (`gpu.with_streams`' `stream_init`, in gpu.mim) also
    names the call in the program that led there: the innermost running function called from
    the program's own text."""
    from verimim.frontend.loader import in_program

    if e.loc is None or in_program(e.loc):
        return
    for act in reversed(th.calls):
        if in_program(act.site):
            e.related = (*e.related, Related(f"in `{act.name}`, called here", act.site))
            return


# Nested direct-style calls of `lam`s the interpreter follows before it reports E-FUEL (each
# holds Python frames; a terminating program nests far less).
MAX_CALL_DEPTH = 20_000


def find_main(world: World, file: str | None = None) -> MutLam:
    """The program's entry point. Without one, the error points at a `main` that is not
    `extern` where there is one, else at the start of `file` (a run needs a location)."""
    main = world.externals.get("main")
    if main is not None:
        return main
    named = next((m for m in world.muts if m.name == "main" and m.loc is not None), None)
    if named is not None:
        raise RuntimeFault("E-NAME", "expected `fun extern main` (or `con extern main`), the program's entry "
                           "point; found a `main` that is not `extern`", named.loc)
    where = Loc(file, 1, 1) if file else None
    raise RuntimeFault("E-NAME", "expected `fun extern main` (or `con extern main`), the program's entry "
                       "point; found no `main`", where)
