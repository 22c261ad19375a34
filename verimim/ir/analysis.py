"""Analyses of the graph of mutables: which parameters a mutable uses (its free variables), and
from that, how continuations nest and which nodes a nested continuation takes from outside.
Shared by the printer (where to put a `where`) and the interpreter (what a closure captures).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from verimim.ir.defs import Def, Lam, MutLam, Var


def free_muts(m: MutLam, cache: dict[int, frozenset[MutLam]]) -> frozenset[MutLam]:
    """The mutables whose parameters `m`'s body uses, directly or through nested mutables."""
    # A fixpoint over the (possibly recursive) graph of mutables.
    order: list[MutLam] = []
    direct: dict[int, tuple[set[MutLam], set[MutLam]]] = {}
    stack = [m]
    while stack:
        x = stack.pop()
        if x.gid in direct or x.gid in cache:
            continue
        vars_, muts = scan_mut(x)
        direct[x.gid] = (vars_, muts)
        order.append(x)
        stack.extend(muts)
    result = {x.gid: set(direct[x.gid][0]) - {x} for x in order}
    changed = True
    while changed:
        changed = False
        for x in order:
            acc = result[x.gid]
            before = len(acc)
            for y in direct[x.gid][1]:
                acc |= cache.get(y.gid, result.get(y.gid, set()))
            acc.discard(x)
            if len(acc) != before:
                changed = True
    for x in order:
        cache[x.gid] = frozenset(result[x.gid])
    return cache[m.gid]


def scan_mut(m: MutLam, annexes: bool = False) -> tuple[set[MutLam], set[MutLam]]:
    """Owners of the Vars used in m's body, and the mutables it references (not looking inside;
    plugin-defined ones such as `gpu.with_streams` only with `annexes`)."""
    vars_: set[MutLam] = set()
    muts: set[MutLam] = set()
    if m.body is None:
        return vars_, muts
    seen: set[int] = set()
    stack: list[Def] = [m.body]
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, Var):
            vars_.add(d.mut)
            continue
        if isinstance(d, MutLam):
            if annexes or d.annex is None:
                muts.add(d)
            continue
        stack.extend(d.ops)
    # The type counts too: a curried mutable whose parameter type is an outer one's parameter
    # (`con seq {A: *} … (acc: A)`) depends on that activation like a use in its body does.
    vars_ |= {v.mut for v in vars_of(m.pi, seen) if v.mut is not m}
    return vars_, muts


def vars_of(root: Def, seen: set[int] | None = None) -> list[Var]:
    """The Vars in `root`, not looking inside mutables, skipping nodes in `seen`."""
    out: list[Var] = []
    seen = set() if seen is None else seen
    stack = [root]
    while stack:
        d = stack.pop()
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, Var):
            out.append(d)
        elif not isinstance(d, MutLam):
            stack.extend(d.ops)
    return out


def postorder(root: Def | list[Def], known: Callable[[Def], bool],
              children: Callable[[Def], Iterable[Def]]) -> list[Def]:
    """The nodes below `root` (one node or several) that are not `known`, children before
    parents and left to right — the order the interpreter runs a body in — without recursion.
    The children of a known node are not visited."""
    out: list[Def] = []
    done: set[int] = set()
    roots = root if isinstance(root, list) else [root]
    work: list[tuple[Def, bool]] = [(r, False) for r in reversed(roots)]
    while work:
        x, expanded = work.pop()
        if x.gid in done:
            continue
        if expanded:
            done.add(x.gid)
            out.append(x)
            continue
        if known(x):
            done.add(x.gid)
            continue
        work.append((x, True))
        for c in reversed(list(children(x))):
            if c.gid not in done:
                work.append((c, False))
    return out


class Scopes:
    """Nesting of mutables and the dependencies of nodes on parameters, cached.

    A node is *local* to a mutable k when it depends on the parameter of k or of a mutable nested
    in k (one that uses k's parameter): it must be computed in each activation of k. A nested
    continuation's *free nodes* are the nodes its body takes from outside: an activation computes
    them once and the continuation's closure captures them.
    """

    def __init__(self) -> None:
        self.fv_cache: dict[int, frozenset[MutLam]] = {}
        self._deps: dict[int, frozenset[MutLam]] = {}
        self._local: dict[int, frozenset[MutLam]] = {}
        self._sched: dict[int, dict[int, Def]] = {}
        self._avail: dict[int, dict[int, Def]] = {}

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
                for y in scan_mut(x)[1]:
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
        immutable λ's body) and those `look_into` selects are not taken whole: their operands are."""
        local = self.local_muts(m)
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
            stack.extend(x.ops)
        return out

    def is_local(self, k: MutLam, d: Def) -> bool:
        deps = self.deps(d)
        return bool(deps) and not deps.isdisjoint(self.local_muts(k))

    def creator(self, c: MutLam) -> MutLam | None:
        """The mutable whose activations create c's closures: the innermost one whose parameter c
        uses (None for a closure that captures nothing)."""
        fv = self.free(c)
        if not fv:
            return None
        # The innermost: every other mutable whose parameter c uses is outside it (in its free
        # set). Counting free mutables is only a fallback: an outer function can capture more.
        inner = [o for o in fv if all(p is o or p in self.free(o) for p in fv)]
        if len(inner) == 1:
            return inner[0]
        return max(fv, key=lambda o: (len(self.free(o)), o.gid))

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
            for x in self._walk_from(roots, lambda x: isinstance(x, MutLam) or is_leaf(x) or x.gid in avail):
                if x.gid in avail or is_leaf(x) or x.gid in out:
                    continue
                out[x.gid] = x
            # Sibling continuations that the closures made here capture are made here too.
            roots = []
            for x in list(out.values()):
                if isinstance(x, MutLam):
                    for y in self.free_muts_of(x):
                        if y.gid not in out and y is not k and y.gid not in avail \
                                and self.creator(y) is k:
                            roots.append(y)
        self._sched[k.gid] = out
        return out

    def free_muts_of(self, c: MutLam) -> list[MutLam]:
        """Mutables (with free variables) that c's local bodies refer to but that are not local to c."""
        local = self.local_muts(c)
        out: list[MutLam] = []
        for m in local:
            for y in scan_mut(m)[1]:
                if y not in local and self.free(y):
                    out.append(y)
        return out

    def available(self, k: MutLam, is_leaf: Callable[[Def], bool]) -> set[int]:
        return set(self.sched(k, is_leaf)) | set(self.avail(k, is_leaf)) | {k.gid}

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
        have = self.available(parent, is_leaf)
        local = self.local_muts(c)
        seen: set[int] = set()
        stack: list[Def] = [m.body for m in local if m.body is not None]
        while stack:
            x = stack.pop()
            if x.gid in seen:
                continue
            seen.add(x.gid)
            if isinstance(x, Lam):
                # an immutable λ made here reads what its body uses from outside through c's
                # closure too (the interpreter's LamValue): look into it
                stack.extend(x.ops)
                continue
            if isinstance(x, Var) or (not isinstance(x, MutLam) and is_leaf(x)):
                continue
            if isinstance(x, MutLam):
                if x not in local and x.gid in have:
                    out[x.gid] = x
                continue
            if self.is_local(c, x):
                stack.extend(x.ops)
                continue
            if x.gid in have:
                out[x.gid] = x
                continue
            stack.extend(x.ops)
        return out


def apps_with_head(t: Def, annex: str) -> list[Def]:
    """The applications of axiom `annex` inside t (e.g. the `mem.M n` types of a type)."""
    from verimim.ir.defs import App, Axiom

    out: list[Def] = []
    seen: set[int] = set()
    stack = [t]
    while stack:
        x = stack.pop()
        if x.gid in seen:
            continue
        seen.add(x.gid)
        if isinstance(x, App) and isinstance(x.head, Axiom) and x.head.annex == annex:
            out.append(x)
            continue
        stack.extend(() if isinstance(x, MutLam) else x.ops)
    return out
