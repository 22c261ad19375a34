"""Compiling a mutable's body into a flat list of instructions for the interpreter.

A body is a DAG ending in one jump. Its nodes are scheduled in demand order (operands first,
left to right, from the jump backwards), so an effect whose memory token never reaches the
jump is never scheduled — exactly the demand-driven meaning of SEMANTICS.md. Each node becomes
a small Python closure that reads its operands from the frame and writes its value to its
slot; the interpreter runs the list with a program counter, which lets a work-item stop at a
barrier and resume later without any Python recursion.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verimim.interp.values import (
    Closure, LamValue, Partial, RuntimeFault, Tagged, Value, bottom_used, holds_bottom,
)
from verimim.ir.defs import (
    App, Arr, Axiom, Bot, Def, Extract, Inject, Insert, Join, Lam, Lit, Match, MutLam, Pack, Pi, Sigma, Top, Tuple,
    TypeU, Univ, Var,
)
from verimim.ir.analysis import is_var_path
from verimim.ir.schedule import Scopes, jump_roots, jump_schedule, postorder, schedule
from verimim.printer import show

if TYPE_CHECKING:
    from verimim.interp.machine import Thread
    from verimim.ir.world import World

Env = dict[int, Value]
Getter = Callable[[list[Value], Env], Value]
Instr = Callable[[list[Value], Env, "Thread"], Any]

SUSPEND = object()  # returned by an instruction that stops its work-item at a barrier


@dataclass
class Code:
    """A compiled body: instructions, then either a jump (callee, argument) or a result value.
    `premade` are the slots of the closures this activation creates: they exist from its start
    (so that sibling continuations can capture each other) and get their captures when their
    instruction runs."""

    instrs: list[Instr]
    nslots: int
    result: Getter
    callee: Getter | None  # a jump when set; `result` is then the argument
    premade: list[tuple[int, MutLam]]
    root: Def | None = None  # the body (for the location of the jump)
    slots: dict[int, int] | None = None  # node id → frame slot (what a lambda made here reads)
    # A function's body: where its return continuation is in the argument (Machine._call)
    ret_at: int | None = None


class Compiler:
    """The compiled bodies of one World's mutables for one table of operations (each annex with
    semantics, and its arity) and of axiom values.

    Instructions reach the machine that runs them through their thread (`th.machine`), and an
    operation's semantics through that machine's table when it runs, never through the
    compiler: code compiled once serves every Machine that runs this World with operations of
    the same arities (verimim.interp.machine shares it: the fuzz oracle and the differential
    specs run one World under several schedules, argument vectors and with effects traced). The
    World is held weakly, as the shared compilers are kept beside it and must not keep it alive."""

    def __init__(self, world: World, scopes: Scopes, arities: dict[str, int], values: dict[str, Value]) -> None:
        self._world = weakref.ref(world)
        self.scopes = scopes
        self.arities = arities
        self.values = values
        self.codes: dict[int, Code] = {}  # a mutable's id → its body's code
        self.lam_codes: dict[tuple[int, bool, frozenset[int]], Code] = {}
        self.expr_codes: dict[tuple[int, frozenset[int]], Code] = {}
        self._static: dict[int, bool] = {}
        self._has_var: dict[int, bool] = {}
        self._leaf: dict[int, bool] = {}
        self._outer: dict[int, list[Def]] = {}  # λ → the nodes its body takes from its creator
        self._type_ops: dict[int, list[Def]] = {}  # type-level node → the values it takes from its frame

    @property
    def world(self) -> World:
        w = self._world()
        if w is None:
            raise RuntimeFault("E-INTERNAL", "compiling for a World that no longer exists", None)
        return w

    def axiom_value(self, ax: Axiom) -> Value:
        if ax.annex in self.values:
            return self.values[ax.annex]
        if self.is_static(ax):
            return ax
        return Partial(ax, ())

    def code_of(self, mut: MutLam) -> Code:
        """The code of a mutable's body, compiled on first use."""
        hit = self.codes.get(mut.gid)
        if hit is not None:
            return hit
        if mut.body is None:
            raise RuntimeFault("E-UNSUPPORTED", f"`{mut.name}` has no body to run", mut.loc)
        w = self.world
        jump = w.is_cn(mut.pi) or _is_bot(w, mut.body)
        hit = self.codes[mut.gid] = self.compile(mut.body, jump=jump, owner=mut)
        dom = mut.pi.dom
        if jump and isinstance(dom, Sigma) and len(dom.ops) >= 2 and w.is_cn(dom.ops[-1]):
            hit.ret_at = len(dom.ops) - 1
        return hit

    # ------------------------------------------------------------------ classification

    def is_static(self, d: Def) -> bool:
        """Whether `d` denotes a type-level value (a type, or a tuple of types): its run-time
        value is an IR node, not data."""
        hit = self._static.get(d.gid)
        if hit is not None:
            return hit
        if isinstance(d, (TypeU, Univ)):
            res = True
        elif isinstance(d, Tuple):
            res = False  # a tuple is built at run time; its type-level elements stay IR nodes
        elif isinstance(_head(d), MutLam):
            # A function of the program, or one given some arguments: a closure made at run
            # time unless it computes a type. One whose type takes types and returns data (the
            # `{B: *} → …` level of `swap {A: *} {B: *}`) is data: as an IR node it would lose
            # what its closure captured (A), and calling it could not be done.
            res = self._returns_types(d)
        else:
            try:
                res = self._wholly_types(self.world.type_of(d))
            except Exception:
                res = False
        self._static[d.gid] = res
        return res

    def _wholly_types(self, t: Def) -> bool:
        """Whether every value of type t is type-level: a type above `*`, or a tuple of such.
        A sigma mixing types and data (`[T: *, x: T]`, the argument of `fun id (T: *, x: T)`)
        is data with type-level fields: as one IR node its data fields would be literals,
        not the run-time values the body computes with."""
        w = self.world
        if isinstance(t, Sigma) and t.ops:
            return all(self._wholly_types(f) for f in t.ops)
        if isinstance(t, Arr):
            return self._wholly_types(t.body)
        return w.level(t) >= 1

    def _returns_types(self, d: Def) -> bool:
        """Whether what d finally returns (d itself, for a value that is no function) is a
        type: the level of its type's last codomain is at least 1."""
        try:
            w = self.world
            t = w.type_of(d)
            while isinstance(t, Pi):
                t = t.codom
            return w.level(t) >= 1
        except Exception:
            return False

    def has_var(self, d: Def) -> bool:
        """Whether `d` mentions a mutable's parameter (so its value depends on the activation)."""
        hit = self._has_var.get(d.gid)
        if hit is not None:
            return hit
        order = postorder(d, lambda x: x.gid in self._has_var,
                          lambda x: () if isinstance(x, (Var, MutLam)) else x.ops)
        for x in order:
            if isinstance(x, Var):
                self._has_var[x.gid] = True
            elif isinstance(x, MutLam):
                self._has_var[x.gid] = False
            else:
                self._has_var[x.gid] = any(self._has_var.get(op.gid, False) for op in x.ops)
        return self._has_var[d.gid]

    # ------------------------------------------------------------------ compiling

    def is_leaf(self, d: Def) -> bool:
        # asked for every node each schedule reaches, many times over: once per node
        hit = self._leaf.get(d.gid)
        if hit is None:
            hit = self._leaf[d.gid] = self._is_leaf(d)
        return hit

    def _is_leaf(self, d: Def) -> bool:
        """Whether `leaf_getter` has a getter for d, without making one."""
        if isinstance(d, (Var, Lit, Axiom, Lam)):
            return True
        if isinstance(d, MutLam):
            return d.annex is not None or not self.scopes.free(d)
        return self.is_static(d) and not self.has_var(d)

    def compile(self, root: Def, jump: bool, owner: MutLam | None = None,
                preset: frozenset[int] = frozenset()) -> Code:
        slots: dict[int, int] = {}
        instrs: list[Instr] = []
        getters: dict[int, Getter] = {}
        premade: list[tuple[int, MutLam]] = []
        # What the owner's closure captured: computed by an enclosing activation, it reaches this
        # one through the closure's environment (see verimim.ir.schedule.Scopes).
        captures = self.scopes.avail(owner, self.is_leaf) if owner is not None else {}
        is_leaf = self.is_leaf

        def captured(d: Def) -> bool:
            return d is owner or d.gid in captures

        def getter(d: Def) -> Getter:
            hit = getters.get(d.gid)
            if hit is not None:
                return hit
            if isinstance(d, Lam):
                # `slots` is this compilation's map, complete by the time the activation runs
                lam = d

                def lam_getter(fr: list[Value], env: Env) -> Value:
                    return LamValue(lam, env, fr, slots)
                getters[d.gid] = lam_getter
                return lam_getter
            g = self.leaf_getter(d)
            if g is None and (d.gid in preset or captured(d)):
                gid = d.gid
                g = lambda fr, env, gid=gid: env[gid]  # noqa: E731
            if g is None:
                i = slots[d.gid]
                g = lambda fr, env, i=i: fr[i]  # noqa: E731
            getters[d.gid] = g
            return g

        def needs_instr(d: Def) -> bool:
            return not is_leaf(d) and d.gid not in preset and not captured(d)

        callee_node: Def | None = None
        if jump and not isinstance(root, App):
            raise RuntimeFault("E-UNSUPPORTED", f"a continuation body must end in a jump; found "
                               f"`{show(root)}`", root.loc)
        top_ops = jump_roots(root) if jump else [root]
        if jump:
            callee_node = top_ops[0]
        # The one body schedule (verimim.ir.schedule), which the code generators follow too: a
        # closure the jump only jumps to or passes on is made last (its slot holds the premade
        # closure from the activation's start), after what the argument demands; what two or
        # more of the closures made here take from outside first, as the code generators do.
        if jump:
            first = self.scopes.shared_needs(owner, is_leaf) if owner is not None else []
            order = list(jump_schedule(root, lambda d: not needs_instr(d), self.operands, first))
        else:
            order = list(schedule(top_ops, lambda d: not needs_instr(d), self.operands))
        for d in order:
            slots[d.gid] = len(slots)
        for d in order:
            if isinstance(d, MutLam):
                premade.append((slots[d.gid], d))
            instrs.append(self.instr(d, slots[d.gid], getter))
        if jump:
            assert callee_node is not None
            return Code(instrs, len(slots), getter(top_ops[1]), getter(callee_node), premade, root, slots)
        return Code(instrs, len(slots), getter(root), None, premade, root, slots)

    def operands(self, d: Def) -> list[Def]:
        """The nodes an instruction for `d` reads: also, for an immutable λ among them, the nodes
        its body takes from this activation (a call reads them from the frame: Machine.lam_captures),
        so that they are computed before the λ can be called (`(lm m = store (m, h, 7), …)#c`
        called before anything else used h read an empty slot)."""
        ops = self._operands(d)
        if any(isinstance(op, Lam) for op in ops):
            ops = ops + [x for op in ops if isinstance(op, Lam) for x in self._lam_outer(op)]
        return ops

    def _operands(self, d: Def) -> list[Def]:
        if isinstance(d, MutLam):
            return list(self.scopes.avail(d, self.is_leaf).values())
        if isinstance(d, Pack):
            return pack_operands(d)
        if self.is_static(d):
            return self._type_operands(d)
        if isinstance(d, App):
            head = d.head
            if isinstance(head, Axiom) and head.annex in self.arities:
                return d.args()
            return [d.callee, d.arg]
        return list(d.ops)

    def _type_operands(self, d: Def) -> list[Def]:
        """The values a type-level node mentions that are neither constants nor parameters (a
        length loaded from memory in `«n; I32»`): computed in the frame before it and given to
        its substitution, which cannot rebuild them (a `mem.load` of a memory token)."""
        hit = self._type_ops.get(d.gid)
        if hit is not None:
            return hit
        out: list[Def] = []
        self._type_ops[d.gid] = out
        if not self.has_var(d):
            return out
        seen: set[int] = set()
        stack: list[Def] = list(d.ops)
        while stack:
            x = stack.pop()
            if x.gid in seen or isinstance(x, (Lit, Axiom, Var, MutLam)) or not self.has_var(x):
                continue
            seen.add(x.gid)
            if x.bvd != 0 or self.is_static(x) or is_var_path(x):
                stack.extend(x.ops)  # (a binder's body, a type: the values in it; a parameter's part: as it is)
                continue
            out.append(x)
        return out

    def _lam_outer(self, lam: Lam) -> list[Def]:
        """The nodes of a λ's body (and of the λs in it) that do not depend on its parameter:
        its creator's, once (not looking into mutables: their captures are their own)."""
        hit = self._outer.get(lam.gid)
        if hit is not None:
            return hit
        out: list[Def] = []
        seen: set[int] = set()
        stack: list[Def] = [lam.body] if lam.body is not None else []
        while stack:
            x = stack.pop()
            if x.gid in seen or isinstance(x, MutLam):
                continue
            seen.add(x.gid)
            if x.bvd == 0 and not isinstance(x, Lam):
                if not self.is_leaf(x):
                    out.append(x)
                continue
            stack.extend(x.ops)
        self._outer[lam.gid] = out
        return out

    def leaf_getter(self, d: Def) -> Getter | None:
        """A getter for nodes that need no instruction: constants and parameters."""
        if isinstance(d, Var):
            key = -d.mut.gid  # a parameter is keyed by minus its mutable's id, captured nodes by theirs
            return lambda fr, env: env[key]
        if isinstance(d, Lit):
            v = d.value
            return lambda fr, env: v
        if isinstance(d, MutLam):
            if d.annex is not None or not self.scopes.free(d):
                clo = Closure(d, {})  # captures nothing: one closure for all
                return lambda fr, env: clo
            return None
        if isinstance(d, Axiom):
            val = self.axiom_value(d)
            return lambda fr, env: val
        if isinstance(d, Lam):
            # An immutable lambda is a value as it stands (with the activation that made it:
            # the parameters it mentions, the nodes it shares with its creator); its body is
            # evaluated when it is called. (Compiler.compile gives it the frame's slot map.)
            return lambda fr, env: LamValue(d, env, fr, {})
        if self.is_static(d) and not self.has_var(d):
            return lambda fr, env: d
        return None

    # ------------------------------------------------------------------ instructions

    def instr(self, d: Def, slot: int, getter: Callable[[Def], Getter]) -> Instr:
        if self.is_static(d):
            return self._reify_instr(d, slot, getter)
        if isinstance(d, MutLam):
            caps = [(x.gid, getter(x)) for x in self.scopes.avail(d, self.is_leaf).values()]

            def make_closure(fr: list[Value], env: Env, th: Thread) -> None:
                clo_env = fr[slot].env  # the closure was made at the activation's start
                clo_env.update(env)
                for gid, g in caps:
                    clo_env[gid] = g(fr, env)
            return make_closure
        if isinstance(d, Tuple):
            gs = [getter(op) for op in d.ops]

            def tup(fr: list[Value], env: Env, th: Thread) -> None:
                fr[slot] = tuple(g(fr, env) for g in gs)
            return tup
        if isinstance(d, Inject):
            gv = getter(d.ops[0])
            w = self.world
            tag = _member_index(w, d.ops[1], w.type_of(d.ops[0]), d)

            def inj(fr: list[Value], env: Env, th: Thread) -> None:
                fr[slot] = Tagged(tag, gv(fr, env))
            return inj
        if isinstance(d, Match):
            gu = getter(d.ops[0])
            garms = [getter(a) for a in d.ops[1:]]

            def match(fr: list[Value], env: Env, th: Thread) -> None:
                u = gu(fr, env)
                assert isinstance(u, Tagged)
                fr[slot] = th.machine.call_value(garms[u.tag](fr, env), u.value, d, th)  # type: ignore[arg-type]
            return match
        if isinstance(d, Extract) and _heterogeneous_at_runtime(self.world, d):
            # A heterogeneous tuple at a run-time index: the element, tagged with its type.
            gt, gi = getter(d.tup), getter(d.index)
            w = self.world
            union = w.type_of(d)
            tup_t = w.zonk(w.type_of(d.tup))
            assert isinstance(tup_t, Sigma)
            tags = [_member_index(w, union, w.shift(f, -1), d) for f in tup_t.ops]

            def ext_union(fr: list[Value], env: Env, th: Thread) -> None:
                i = gi(fr, env)
                fr[slot] = Tagged(tags[i], th.machine.extract_value(gt(fr, env), i, d))
            return ext_union
        if isinstance(d, Extract):
            gt, gi = getter(d.tup), getter(d.index)

            def ext(fr: list[Value], env: Env, th: Thread) -> None:
                t = gt(fr, env)
                i = gi(fr, env)
                fr[slot] = th.machine.extract_value(t, i, d)
            return ext
        if isinstance(d, Insert):
            gt, gi, gv = (getter(op) for op in d.ops)

            def ins(fr: list[Value], env: Env, th: Thread) -> None:
                fr[slot] = th.machine.insert_value(gt(fr, env), gi(fr, env), gv(fr, env), d)
            return ins
        if isinstance(d, Pack):
            ops = pack_operands(d)
            known_getters = [(op.gid, getter(op)) for op in ops]

            def pack(fr: list[Value], env: Env, th: Thread) -> None:
                known = {gid: g(fr, env) for gid, g in known_getters}  # computed in this frame, not again
                fr[slot] = th.machine.eval_pack(d, env, th, known)
            return pack
        if isinstance(d, App):
            return self._app_instr(d, slot, getter)
        if isinstance(d, (Bot, Top)):
            def undef(fr: list[Value], env: Env, th: Thread) -> None:
                fr[slot] = None
            return undef
        raise RuntimeFault("E-UNSUPPORTED", f"the interpreter cannot evaluate `{show(d)}` "
                           f"({type(d).__name__})", d.loc)

    def _reify_instr(self, d: Def, slot: int, getter: Callable[[Def], Getter]) -> Instr:
        computed = [(x.gid, getter(x)) for x in self._type_operands(d)]
        if not computed:
            def reify(fr: list[Value], env: Env, th: Thread) -> None:
                fr[slot] = th.machine.substitute(d, env)
            return reify

        def reify_with(fr: list[Value], env: Env, th: Thread) -> None:
            # (the values this frame computed, by node: substitute takes them as they are)
            fr[slot] = th.machine.substitute(d, {**env, **{gid: g(fr, env) for gid, g in computed}})
        return reify_with

    def _app_instr(self, d: App, slot: int, getter: Callable[[Def], Getter]) -> Instr:
        head = d.head
        if isinstance(head, Axiom) and head.annex in self.arities:
            arity, annex = self.arities[head.annex], head.annex
            args = d.args()
            gs = [getter(a) for a in args]
            if len(args) < arity:
                def partial(fr: list[Value], env: Env, th: Thread) -> None:
                    fr[slot] = Partial(head, tuple(g(fr, env) for g in gs))
                return partial
            if len(args) > arity:
                raise RuntimeFault("E-UNSUPPORTED", f"`{head.annex}` applied to too many arguments", d.loc)

            def call(fr: list[Value], env: Env, th: Thread) -> Any:
                m = th.machine
                vals = [g(fr, env) for g in gs]
                try:
                    res = m.semantics[annex][1](m, th, vals, d)
                except (TypeError, AttributeError):
                    # ⊥ (None) where an operation computes with a value: the program's fault
                    if any(holds_bottom(v) for v in vals):
                        raise bottom_used(f"`{annex}`", d.loc) from None
                    raise
                if res is SUSPEND:
                    fr[slot] = th.barrier_result
                    return SUSPEND
                fr[slot] = res
                return None
            return call
        if isinstance(head, Axiom):
            raise RuntimeFault("E-UNSUPPORTED", f"the interpreter has no semantics for `{head.annex}`", d.loc)
        gc, ga = getter(d.callee), getter(d.arg)

        def apply(fr: list[Value], env: Env, th: Thread) -> None:
            fr[slot] = th.machine.call_value(gc(fr, env), ga(fr, env), d, th)
        return apply


def _is_bot(w: World, d: Def) -> bool:
    """Whether d's type is ⊥ (a body that never returns: compiled as a jump)."""
    try:
        return isinstance(w.type_of(d), Bot)
    except Exception:
        return False


def pack_operands(d: Pack) -> list[Def]:
    """The maximal closed nodes of a pack's shape and body: computed in the enclosing frame, so
    that evaluating the pack's elements repeats no effect."""
    out: list[Def] = []
    seen: set[int] = set()
    stack: list[Def] = [d.shape, d.body]
    while stack:
        x = stack.pop()
        if x.gid in seen:
            continue
        seen.add(x.gid)
        if x.bvd == 0:
            if not isinstance(x, (Lit, Axiom, Var)) and not x.mutable:
                out.append(x)
            continue
        stack.extend(x.ops)
    return out


def _member_index(world: object, union: Def, member: Def, at: Def) -> int:
    """The position of `member` among the union's members (the Join's canonical order)."""
    if isinstance(union, Join) and member in union.ops:
        return union.ops.index(member)
    raise RuntimeFault("E-UNSUPPORTED", f"`{show(member)}` is not a member of `{show(union)}`", at.loc)


def _heterogeneous_at_runtime(world: object, d: Extract) -> bool:
    """`t#i` with a non-literal i into a sigma of different types: a union value."""
    w = world
    if isinstance(d.index, Lit):
        return False
    tup_t = w.zonk(w.type_of(d.tup))  # type: ignore[attr-defined]
    return isinstance(tup_t, Sigma) and isinstance(w.zonk(w.type_of(d)), Join)  # type: ignore[attr-defined]


def _head(d: Def) -> Def:
    while isinstance(d, App):
        d = d.callee
    return d
