"""The schedule of a body: the order its operations run in, and what a nested continuation
captures from the activation that creates it.

One schedule for everyone who runs or replays a body — the reference interpreter
(verimim.interp.compile), the code generators (verimim.runtime.nvptx, verimim.runtime.cps), the
kernel verifier (verimim.smt.kernel_eval) and the specifications that replay effects
(verimim.smt.specs, verimim.smt.spec_btensor) — so that the interpreter and the generated code
order effects by the same code, as SEMANTICS.md's demand-driven meaning says:

- a body is the DAG below its jump; an activation computes it operands first, left to right,
  from the callee and then the argument (`jump_roots`, `schedule`); a node nobody demands is
  never computed, so an effect whose memory token never reaches the jump does not happen;
- a nested continuation's closure captures what its creator's activation has at hand
  (`Scopes.avail`); everything else it needs from outside, it computes itself (`Scopes.sched`);
- making a closure demands nothing: a continuation the jump only jumps to or passes on is made
  last, once what it captures has been computed where the body demands it (`jump_schedule`),
  as a code generator names a block and upstream's emitter jumps to one: arguments left to
  right, the callee a label. Only a closure an operation of the body may call (a direct-style
  call) is made before that operation, after what it captures.

What a node's operands are, and which nodes are already at hand, is the caller's (a code
generator does not compute a type, the interpreter does not compute a literal): `schedule`
takes both as functions and asks `known` only when it reaches a node, after everything
scheduled before it has been computed — a caller may compute lazily while it iterates.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from verimim.ir.analysis import free_muts, innermost, scan_mut
from verimim.ir.defs import App, Axiom, Def, Extract, Lam, MutLam, Pack, Tuple, Var

if TYPE_CHECKING:
    from verimim.ir.world import World


def jump_roots(body: Def) -> list[Def]:
    """What a continuation's body demands, in order: the callee, then the argument, of its jump
    (the body itself when it is not a jump: a function returning a value)."""
    if isinstance(body, App):
        return [body.callee, body.arg]
    return [body]


def schedule(roots: Def | list[Def], known: Callable[[Def], bool],
             operands: Callable[[Def], Iterable[Def]]) -> Iterator[Def]:
    """The nodes below `roots` that are not `known`, operands before the node and left to right,
    each once, without recursion. The operands of a known node are not visited; `known` is asked
    when a node is reached, so what the caller computed for the nodes yielded before counts.
    A cycle (closures that capture each other) is cut where it closes."""
    done: set[int] = set()
    visiting: set[int] = set()
    todo = roots if isinstance(roots, list) else [roots]
    work: list[tuple[Def, bool]] = [(r, False) for r in reversed(todo)]
    while work:
        x, expanded = work.pop()
        if x.gid in done:
            continue
        if expanded:
            done.add(x.gid)
            yield x
            continue
        if x.gid in visiting:
            continue
        if known(x):
            done.add(x.gid)
            continue
        visiting.add(x.gid)
        work.append((x, True))
        for c in reversed(list(operands(x))):
            if c.gid not in done:
                work.append((c, False))


def jump_schedule(body: Def, known: Callable[[Def], bool], operands: Callable[[Def], Iterable[Def]],
                  first: Iterable[Def] = ()) -> Iterator[Def]:
    """`schedule` of a body that ends in a jump: `first` (an activation's shared needs, which
    the code generators compute before the jump's operands), then the callee and the argument,
    where `operands` of a closure are what it captures. A closure that the jump alone reaches,
    through tuples, extracts and other closures' captures (`(fin, done)#c`, a return
    continuation in the argument), is made after everything else: making it demands nothing,
    so what it captures is computed where the body demands it, not ahead of the argument (a
    callee `fin` that captured the store `g` of its argument `(x, g)` ran g, and the barrier
    below it, before x). `known` is asked of the nodes below the jump before any is computed."""
    roots = jump_roots(body)
    later = _made_last(roots, known, operands)
    if not later:
        yield from schedule([*first, *roots], known, operands)
        return
    done: set[int] = set()
    for x in schedule([*first, *roots], lambda d: d.gid in later or known(d), operands):
        done.add(x.gid)
        yield x
    yield from schedule(list(later.values()), lambda d: d.gid in done or known(d), operands)


def _made_last(roots: list[Def], known: Callable[[Def], bool],
               operands: Callable[[Def], Iterable[Def]]) -> dict[int, Def]:
    """The closures (not `known`) below `roots` that no operation of the body may call: reached
    only through tuples, extracts and captures, never through an operand of another node (an
    application: a direct-style call of the closure, or of a function given it, enters it
    while the body runs). In the order the jump names them."""
    # First what the jump holds through tuples, extracts and captures alone (a few nodes): the
    # candidates, and the operations reached there; only where there is a candidate, below those
    # operations, the closures they may call (a walk of the whole body, at every compile).
    passing = (MutLam, Tuple, Extract)  # hold their operands, enter none
    jump_only: dict[int, Def] = {}
    ops: list[Def] = []
    seen: set[int] = set()
    stack = list(reversed(roots))
    while stack:
        x = stack.pop()
        if x.gid in seen or known(x):
            continue
        seen.add(x.gid)
        if isinstance(x, MutLam):
            jump_only.setdefault(x.gid, x)
        if isinstance(x, passing):
            stack.extend(reversed(list(operands(x))))
        else:
            ops.append(x)
    if not jump_only:
        return jump_only
    called: set[int] = set()
    below: set[int] = set()
    stack = [c for x in ops for c in operands(x)]
    while stack and len(called) < len(jump_only):
        x = stack.pop()
        if x.gid in below or known(x):
            continue
        below.add(x.gid)
        if isinstance(x, MutLam) and x.gid in jump_only:
            called.add(x.gid)
        stack.extend(operands(x))
    return {g: m for g, m in jump_only.items() if g not in called}


def postorder(roots: Def | list[Def], known: Callable[[Def], bool],
              children: Callable[[Def], Iterable[Def]]) -> list[Def]:
    """`schedule` as a list."""
    return list(schedule(roots, known, children))


def activation(m: MutLam, scopes: "Scopes", is_leaf: Callable[[Def], bool],
               operands: Callable[[Def], Iterable[Def]]) -> list[Def]:
    """The nodes an activation of m computes itself, in the order it computes them: what its
    jump demands, less the leaves and what m's closure captured from its creator."""
    if m.body is None:
        return []
    captured = scopes.avail(m, is_leaf)
    known = lambda d: is_leaf(d) or d.gid in captured  # noqa: E731
    if not isinstance(m.body, App):
        return postorder(jump_roots(m.body), known, operands)
    return list(jump_schedule(m.body, known, operands, scopes.shared_needs(m, is_leaf)))


Node = TypeVar("Node")


def immediate_dominators(succ: dict[Node, list[Node]], root: Node) -> dict[Node, Node]:
    """The immediate dominator of every node reachable from root (root's is root): the
    iterative algorithm of Cooper, Harvey and Kennedy over a reverse postorder. Written here
    rather than taken from networkx, whose import alone is a sixth of a small `verimim run`."""
    order: list[Node] = []
    seen = {root}
    stack = [(root, iter(succ.get(root, ())))]
    while stack:
        node, it = stack[-1]
        nxt = next((y for y in it if y not in seen), None)
        if nxt is None:
            stack.pop()
            order.append(node)
            continue
        seen.add(nxt)
        stack.append((nxt, iter(succ.get(nxt, ()))))
    rpo = order[::-1]
    index = {n: i for i, n in enumerate(rpo)}
    preds: dict[Node, list[Node]] = {n: [] for n in rpo}
    for n in rpo:
        for y in succ.get(n, ()):
            if y in index:
                preds[y].append(n)
    idom = {root: root}

    def meet(a: Node, b: Node) -> Node:
        while a is not b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for n in rpo[1:]:
            known = [p for p in preds[n] if p in idom]  # its DFS parent at least, being earlier
            new = known[0]
            for p in known[1:]:
                new = meet(p, new)
            if idom.get(n) is not new:
                idom[n] = new
                changed = True
    return idom


def _closure(start: Node, step: Callable[[Node], Iterable[Node]]) -> set[Node]:
    """What start reaches by steps, start excluded unless a cycle leads back to it."""
    out: set[Node] = set()
    todo = [start]
    while todo:
        for y in step(todo.pop()):
            if y not in out:
                out.add(y)
                todo.append(y)
    return out


@dataclass(frozen=True)
class _NameGraph:
    """The direct names among one mutable's local continuations (verimim.ir.schedule.Scopes)."""

    succ: dict[MutLam, list[MutLam]]   # r → the continuations r's body names outside any λ
    preds: dict[MutLam, list[MutLam]]  # the reverse
    idom: dict[MutLam, MutLam]         # immediate dominators from the mutable (its own: itself)
    # the continuations one that outer's activation may reach at all (through λs too) names
    # otherwise than directly from one the graph reaches: through an immutable λ, or from a
    # continuation not reached by names
    indirect: frozenset[MutLam]


@dataclass
class _Structure:
    """The analyses of a World's mutables that depend on its nodes alone (see Scopes), by id;
    kept with the World (World.kept), whose nodes never change once a phase or the front end
    has finished it (a mutable's body is set once)."""

    fv_cache: dict[int, frozenset[MutLam]] = field(default_factory=dict)
    deps: dict[int, frozenset[MutLam]] = field(default_factory=dict)
    local: dict[int, frozenset[MutLam]] = field(default_factory=dict)
    refs: dict[int, frozenset[MutLam]] = field(default_factory=dict)
    creator: dict[int, MutLam | None] = field(default_factory=dict)
    nested: dict[int, frozenset[MutLam]] = field(default_factory=dict)
    direct: dict[int, frozenset[MutLam]] = field(default_factory=dict)
    names_graph: dict[int, _NameGraph] = field(default_factory=dict)
    reaches: dict[tuple[int, int], bool] = field(default_factory=dict)  # (start, target) ids


class Scopes:
    """Nesting of mutables and the dependencies of nodes on parameters, cached.

    A node is *local* to a mutable k when it depends on the parameter of k or of a mutable nested
    in k (one that uses k's parameter): it must be computed in each activation of k. A nested
    continuation's *free nodes* are the nodes its body takes from outside: an activation computes
    them once and the continuation's closure captures them.
    """

    def __init__(self, world: World | None = None) -> None:
        # What depends on the World's nodes alone is shared by every user of a finished World
        # (`world` given): the interpreter, the kernel verifier and the specs each schedule the
        # same Worlds. What a body's schedule captures depends on the caller's leaves too, and
        # stays with this Scopes.
        st = _Structure() if world is None else world.keep("schedule.structure", _Structure)
        self.fv_cache = st.fv_cache
        self._deps = st.deps
        self._local = st.local
        self._refs = st.refs
        self._creator = st.creator
        self._nested = st.nested
        self._direct = st.direct
        self._names_graph = st.names_graph
        self._reached = st.reaches
        self._sched: dict[int, dict[int, Def]] = {}
        self._shared: dict[int, list[Def]] = {}
        self._avail: dict[int, dict[int, Def]] = {}
        self._avail_busy: set[int] = set()  # continuations whose captures are being found
        self._available: dict[int, set[int]] = {}

    def refs(self, m: MutLam) -> frozenset[MutLam]:
        """The mutables m's body refers to (`scan_mut`), once per mutable: the nesting analyses
        ask for them again and again."""
        hit = self._refs.get(m.gid)
        if hit is None:
            hit = self._refs[m.gid] = frozenset(scan_mut(m)[1])
        return hit

    def free(self, m: MutLam) -> frozenset[MutLam]:
        return free_muts(m, self.fv_cache)

    def local_muts(self, k: MutLam) -> frozenset[MutLam]:
        hit = self._local.get(k.gid)
        if hit is not None:
            return hit
        # Nested is transitive: g nested in f nested in k is local to k even when g uses only
        # f's parameter (each activation of k makes new f's and so new g's). A fixpoint, since a
        # mutable may be reached before the one that makes it local.
        out = {k}
        changed = True
        while changed:
            changed = False
            for x in list(out):
                for y in self.refs(x):
                    if y not in out and not self.free(y).isdisjoint(out):
                        out.add(y)
                        changed = True
        res = frozenset(out)
        self._local[k.gid] = res
        return res

    def deps(self, d: Def) -> frozenset[MutLam]:
        """The mutables whose parameters `d` depends on."""
        hit = self._deps.get(d.gid)
        if hit is not None:
            return hit
        order = postorder(d, lambda x: x.gid in self._deps,
                          lambda x: () if isinstance(x, (Var, MutLam)) else x.ops)
        empty: frozenset[MutLam] = frozenset()
        for x in order:
            if isinstance(x, Var):
                self._deps[x.gid] = frozenset({x.mut})
            elif isinstance(x, MutLam):
                self._deps[x.gid] = self.free(x) if x.annex is None else empty
            else:
                acc: frozenset[MutLam] = empty
                for op in x.ops:
                    sub = self._deps.get(op.gid, empty)
                    if sub:
                        acc = acc | sub
                self._deps[x.gid] = acc
        return self._deps[d.gid]

    def outside(self, m: MutLam, look_into: Callable[[Def], bool] | None = None) -> list[Def]:
        """What m's bodies (m's and those of the mutables nested in it) take from outside m, in
        the order found: the maximal nodes computed from enclosing parameters (those parameters
        included), and the closures made outside that capture something. Open nodes (inside an
        immutable λ's body) and those `look_into` selects are not taken whole: their operands are.
        The continuations m's activations make (`nested`) are inside m, as those using its
        parameter are: what they take from outside, m takes."""
        local = self.nested(m)
        out: list[Def] = []
        seen: set[int] = set()
        stack: list[Def] = [m.body] if m.body is not None else []
        while stack:
            x = stack.pop()
            if x.gid in seen:
                continue
            seen.add(x.gid)
            if isinstance(x, MutLam):
                if x in local:
                    if x.body is not None:
                        stack.append(x.body)
                elif self.free(x):
                    out.append(x)
                continue
            deps = self.deps(x)
            if not deps:
                continue
            if deps.isdisjoint(local) and x.bvd == 0 and not (look_into is not None and look_into(x)):
                out.append(x)
                continue
            if isinstance(x, Var):
                continue  # its operand is its binder, no closure m uses
            stack.extend(x.ops)
        return out

    def is_local(self, k: MutLam, d: Def) -> bool:
        deps = self.deps(d)
        return bool(deps) and not deps.isdisjoint(self.local_muts(k))

    def creator(self, c: MutLam) -> MutLam | None:
        """The mutable whose activations create c's closures (None for a closure that captures
        nothing): the innermost one whose parameter c uses, or, below it, c's immediate
        dominator among that one's continuations: the last one every way to c passes through.

        The second is the dominance upstream's scheduler uses. A continuation `ret_2` that only
        `ret_1` jumps to (the return continuation of a launch made there) runs only after ret_1,
        so its closure is made by ret_1 and captures what ret_1 computed, even where it uses no
        parameter of ret_1. Made by the outer function instead, it would compute again what it
        shares with ret_1 and the outer function does not have: an effect (a `gpu.alloc.block`
        whose memory token comes from outside both) would happen twice."""
        if c.gid in self._creator:
            return self._creator[c.gid]
        fv = self.free(c)
        if not fv:
            self._creator[c.gid] = None
            return None
        # The innermost: every other mutable whose parameter c uses is outside it (in its
        # free set). Counting free mutables is only a fallback: an outer function can
        # capture more.
        inner = innermost(fv, self.free)
        outer = inner[0] if len(inner) == 1 else max(fv, key=lambda o: (len(self.free(o)), o.gid))
        self._creator[c.gid] = outer  # provisional: cuts cycles through the dominators' creators
        # below it, the dominator, when it is itself made inside outer's activations (its
        # creator chain reaches outer without passing through c); structural, so the answer does
        # not depend on the order creators are asked for
        maker = self._dominator(c, outer)
        if maker is None or not self._reaches(maker, outer, avoid=c):
            maker = outer
        self._creator[c.gid] = maker
        return maker

    def _reaches(self, start: MutLam | None, target: MutLam, avoid: MutLam | None = None) -> bool:
        """Whether the creator chain from `start` (itself included) meets `target` before it
        ends, repeats or meets `avoid`.

        Without `avoid` (`nested`'s question, asked once creators are settled) the answer is
        remembered for every mutable on the way: `nested` asks it of each continuation for each
        enclosing one, and a chain of n nested continuations walked again each time cost n³
        (a 400-deep chain ran 5 s, most of it here)."""
        seen: set[int] = set()
        path: list[int] = []
        found = False
        x = start
        while x is not None and x is not avoid and x.gid not in seen:
            if x is target:
                found = True
                break
            if avoid is None:
                hit = self._reached.get((x.gid, target.gid))
                if hit is not None:
                    found = hit
                    break
                path.append(x.gid)
            seen.add(x.gid)
            x = self.creator(x)
        for gid in path:
            self._reached[(gid, target.gid)] = found
        return found

    def _dominator(self, c: MutLam, outer: MutLam) -> MutLam | None:
        """The continuation that every way from outer's activation to c passes through last:
        c's immediate dominator in the graph of direct names among outer's local
        continuations (the one continuation that names c; the one that names both arms of a
        branch jumping to c; the launch's return continuation above branches of any depth and
        loops). Only where every live way into c, and into each continuation between the
        dominator and c, is a direct name from a continuation the graph reaches: one entered
        through an immutable λ (each backend makes those its own way) need not run after the
        dominator's activation. None otherwise."""
        g = self._naming(outer)
        maker = g.idom.get(c)
        if maker is None or maker is c:
            return None
        above: set[MutLam] = _closure(c, lambda x: g.preds.get(x, ()))
        below: set[MutLam] = _closure(maker, lambda x: g.succ.get(x, ()))
        if any(x in g.indirect for x in (c, *((above & below) - {maker}))):
            return None
        return maker

    def _naming(self, outer: MutLam) -> _NameGraph:
        """Once per outer: the graph of direct names among outer's local continuations (a name
        of outer itself starts a new activation of outer, so it is no edge), its immediate
        dominators from outer, and which continuations are also entered otherwise than by those
        names (among those outer's activation may reach at all: the others are dead code)."""
        hit = self._names_graph.get(outer.gid)
        if hit is not None:
            return hit
        local = self.local_muts(outer)
        succ = {r: sorted((y for y in self._direct_refs(r) if y in local and y is not r and y is not outer),
                          key=lambda y: y.gid) for r in local}
        live = {outer} | _closure(outer, lambda x: (y for y in self.refs(x) if y in local))
        preds: dict[MutLam, list[MutLam]] = {}
        for r, ys in succ.items():
            for y in ys:
                preds.setdefault(y, []).append(r)
        idom = immediate_dominators(succ, outer)
        indirect = frozenset(x for r in live for x in self.refs(r)
                             if x is not r and (r not in idom or x not in self._direct_refs(r)))
        hit = self._names_graph[outer.gid] = _NameGraph(succ, preds, idom, indirect)
        return hit

    def _direct_refs(self, r: MutLam) -> frozenset[MutLam]:
        """The mutables r's body names outside any immutable λ's body (a parameter does not
        name its mutable, as in `scan_mut`)."""
        hit = self._direct.get(r.gid)
        if hit is not None:
            return hit
        # A walk of its own, not _walk_from: it runs over every local body of every World
        # scheduled, and keeps only the mutables (a fifth of the nesting analyses' time).
        out: set[MutLam] = set()
        seen: set[int] = set()
        stack: list[Def] = [r.body] if r.body is not None else []
        while stack:
            x = stack.pop()
            if x.gid in seen:
                continue
            seen.add(x.gid)
            if isinstance(x, MutLam):
                out.add(x)
            elif not isinstance(x, (Lam, Var)):
                stack.extend(x.ops)
        hit = self._direct[r.gid] = frozenset(out)
        return hit

    def nested(self, k: MutLam) -> frozenset[MutLam]:
        """The mutables whose activations happen inside k's: those local to k (they use its
        parameter) and those whose closures k, or one of these, creates."""
        hit = self._nested.get(k.gid)
        if hit is not None:
            return hit
        out = set(self.local_muts(k))
        todo = list(out)
        while todo:
            x = todo.pop()
            for y in self.refs(x):
                if y in out or not self.free(y) or not self._reaches(self.creator(y), k):
                    continue
                for z in (y, *self.local_muts(y)):
                    if z not in out:
                        out.add(z)
                        todo.append(z)
        res = frozenset(out)
        self._nested[k.gid] = res
        return res


    def _walk_from(self, roots: list[Def], stop: Callable[[Def], bool]) -> list[Def]:
        out: list[Def] = []
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            x = stack.pop()
            if x.gid in seen:
                continue
            seen.add(x.gid)
            out.append(x)
            if stop(x):
                continue
            stack.extend(x.ops)
        return out

    def sched(self, k: MutLam, is_leaf: Callable[[Def], bool]) -> dict[int, Def]:
        """The nodes an activation of k computes itself: those its jump demands (not looking into
        other mutables' bodies), what k's closure captures excluded, and the closures it makes."""
        hit = self._sched.get(k.gid)
        if hit is not None:
            return hit
        avail = self.avail(k, is_leaf)
        out: dict[int, Def] = {}
        roots: list[Def] = [k.body] if k.body is not None else []
        while roots:
            lams: list[Def] = []
            for x in self._walk_from(roots, lambda x: isinstance(x, MutLam) or is_leaf(x) or x.gid in avail):
                if isinstance(x, Lam):
                    lams.append(x)
                if x.gid in avail or is_leaf(x) or x.gid in out:
                    continue
                out[x.gid] = x
            # Sibling continuations that the closures made here capture are made here too; so
            # are those an immutable λ made here refers to (a branch target applying a curried
            # continuation): the λ's activation makes them from what this one has at hand, and
            # what they capture must be at hand here, or a continuation nested in them would
            # compute it again (repeating its effects).
            in_lams = [y for y in self._walk_from(lams, lambda x: isinstance(x, MutLam))
                       if isinstance(y, MutLam) and self.free(y)]
            # (also those that continuations made inside these closures refer to: a closure
            # made by one of them is not where an outer continuation's closure is made)
            siblings = [y for x in out.values() if isinstance(x, MutLam)
                        for n in sorted(self.nested(x), key=lambda n: n.gid) for y in self.free_muts_of(n)]
            roots = [y for y in in_lams + siblings
                     if y.gid not in out and y is not k and y.gid not in avail and self.creator(y) is k]
        for x in self.shared_needs(k, is_leaf):
            if x.gid not in avail:
                out.setdefault(x.gid, x)
        self._sched[k.gid] = out
        return out

    def shared_needs(self, k: MutLam, is_leaf: Callable[[Def], bool]) -> list[Def]:
        """Nodes that two or more of the continuations k's activation creates take from outside,
        in the order found: k computes them, once, and each captures them. One node is one
        value (a `mem.slot` bound before a branch and stored to in both arms is one block,
        which the join after them reads); computed by each continuation that uses it, it would
        be one block per continuation. This is upstream's placement in the common dominator of
        the uses. The interpreter (through `sched`) and the code generators compute them. What
        k's closure captures is no need (k has it), nor is anything only a captured value uses:
        an operation main's activation ran (`gpu.init`, whose results the continuations take
        from k's closure) would run again in k."""
        hit = self._shared.get(k.gid)
        if hit is not None:
            return hit
        captured = self.avail(k, is_leaf)
        inner = self.nested(k) - {k}
        children = sorted((y for y in inner if y.body is not None and self.creator(y) is k),
                          key=lambda y: y.gid)
        users: dict[int, int] = {}
        nodes: dict[int, Def] = {}
        if len(children) >= 2:
            for y in children:
                for x in self._taken_from_outside(y, is_leaf, captured):
                    users[x.gid] = users.get(x.gid, 0) + 1
                    nodes[x.gid] = x
        out = [nodes[g] for g, n in users.items() if n >= 2 and self.deps(nodes[g]).isdisjoint(inner)]
        self._shared[k.gid] = out
        return out

    def _taken_from_outside(self, y: MutLam, is_leaf: Callable[[Def], bool], captured: dict[int, Def]) -> list[Def]:
        """The values the bodies of y (and of what its activations make) demand that do not
        depend on y's activation: what y computes itself, or captures, from outside. From the
        jumps' callees and arguments (a body is its own, never a value another one takes);
        an operation's head applied to only some of its arguments (`mem.load @(I32, 0)`) and
        a node that holds a continuation are looked into, not taken: neither is a value a
        code generator computes."""
        local = self.nested(y)
        out: list[Def] = []
        seen: set[int] = set()
        stack: list[tuple[Def, bool]] = [(r, False) for m in local if m.body is not None for r in jump_roots(m.body)]
        while stack:
            x, head = stack.pop()
            if x.gid in seen:
                continue
            seen.add(x.gid)
            if isinstance(x, (Var, MutLam)) or (not isinstance(x, Lam) and is_leaf(x)):
                continue
            if x.gid in captured:
                continue  # the creator's closure has it (and what it was made of)
            if isinstance(x, App):
                stack.append((x.callee, True))
                stack.append((x.arg, False))
            else:
                stack.extend((op, False) for op in x.ops)
            if head or isinstance(x, Lam) or x.bvd != 0 or self.is_local(y, x) or holds_continuation(x):
                continue  # (x.bvd: inside an immutable λ's body, open: only that λ can compute it)
            out.append(x)
        return out

    def free_muts_of(self, c: MutLam) -> list[MutLam]:
        """Mutables (with free variables) that c's local bodies refer to but that are not local to c."""
        local = self.local_muts(c)
        out: list[MutLam] = []
        for m in local:
            for y in self.refs(m):
                if y not in local and self.free(y):
                    out.append(y)
        return out

    def available(self, k: MutLam, is_leaf: Callable[[Def], bool]) -> set[int]:
        """What k's activation has at hand: what it computes, what its closure captured, and k.
        Kept once k's captures are final (not while `avail` of k is still being found: a cycle
        of closures is cut there); every continuation k creates asks for it."""
        hit = self._available.get(k.gid)
        if hit is not None:
            return hit
        out = set(self.sched(k, is_leaf)) | set(self.avail(k, is_leaf)) | {k.gid}
        if k.gid not in self._avail_busy:
            self._available[k.gid] = out
        return out

    def avail(self, c: MutLam, is_leaf: Callable[[Def], bool]) -> dict[int, Def]:
        """What c's closure captures: the nodes c's bodies use from outside that its creator's
        activation has at hand. Everything else c needs from outside it computes itself."""
        hit = self._avail.get(c.gid)
        if hit is not None:
            return hit
        parent = self.creator(c)
        out: dict[int, Def] = {}
        self._avail[c.gid] = out  # cut cycles: a creator never needs its children's captures
        if parent is None:
            return out
        self._avail_busy.add(c.gid)
        try:
            self._find_captures(c, self.available(parent, is_leaf), is_leaf, out)
        finally:
            self._avail_busy.discard(c.gid)
        return out

    def _find_captures(self, c: MutLam, have: set[int], is_leaf: Callable[[Def], bool], out: dict[int, Def]) -> None:
        # what the closures c makes capture is taken from c's activation, so through c's closure
        local = self.nested(c)
        c_local = self.local_muts(c)
        deps = self.deps
        seen: set[int] = set()
        stack: list[Def] = [m.body for m in local if m.body is not None]
        # The curried heads of an operation (`gpu.launch (1, 4, s, ff, ())` of `gpu.launch … k
        # args mems`) are looked into, never captured: the interpreter and the code generators
        # take an operation's arguments from its whole application, not from its head, which
        # two launches with one configuration share (captured from the creator, it left the
        # configuration's stream, and main's `gpu.init` below it, to be computed again).
        heads: set[int] = set()
        while stack:
            x = stack.pop()
            gid = x.gid
            if gid in seen:
                continue
            seen.add(gid)
            if gid in heads:
                stack.extend(x.ops)
                continue
            kind = type(x)
            if kind is Lam:
                # an immutable λ made here reads what its body uses from outside through c's
                # closure too (the interpreter's LamValue): look into it
                stack.extend(x.ops)
                continue
            if kind is Var:
                continue
            if kind is MutLam:
                if gid in have and x not in local:
                    out[gid] = x
                continue
            if is_leaf(x):
                continue
            d = deps(x)
            if d and not d.isdisjoint(c_local):  # local to c (Scopes.is_local)
                stack.extend(x.ops)
                continue
            if gid in have:
                out[gid] = x
                continue
            if isinstance(x, App) and isinstance(x.head, Axiom) and x.callee.gid not in seen:
                heads.add(x.callee.gid)
            stack.extend(x.ops)


def holds_continuation(x: Def) -> bool:
    """Whether x is built from a mutable by tuples, extracts and packs: a continuation chosen
    (`(finish, return)#c`), not data. A code generator jumps through it; as a value, a choice
    between continuations of different shapes is nothing it can compute. A parameter is a value
    given at run time, whatever its type: its operand is its binder, not a continuation it holds
    (the `c` of a curried `con join (c: I32) (…)` was looked into, and the record of a continuation
    that used it captured `join` itself, which the GPU backend then took for a continuation)."""
    if isinstance(x, Var):
        return False
    stack, seen = [x], set()
    while stack:
        d = stack.pop()
        for op in d.ops:
            if isinstance(op, MutLam):
                return True
            if isinstance(op, (Tuple, Extract, Pack)) and op.gid not in seen:
                seen.add(op.gid)
                stack.append(op)
    return False
