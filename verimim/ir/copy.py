"""Copying a World's nodes into a fresh World, as they are: the front end loads the same plugins
for every program, and copying their elaborated nodes is several times cheaper than elaborating
them again (verimim.frontend.loader keeps one elaborated World per set of imports).

The copy is exact, not a rebuild: no constructor or normalizer runs, every node keeps its
fields, names and locations, new ids are handed out in the order of the old ones (so what
orders by id orders the same), and the hash-consing table is the old one re-keyed. The World
copied from is never changed afterwards (`CopyPlan` reads it once), and no node of it is
reachable from a copy.
"""
from __future__ import annotations

import dataclasses
from typing import Any, cast

from verimim.ir import defs
from verimim.ir.defs import Def, MutLam
from verimim.ir.world import RuleDef, World

_SLOTS: dict[type, tuple[str, ...]] = {}

# How a slot's value is copied: as it is, as the copy of a node, as a tuple with nodes in it, as
# a tuple of nodes only, as the target World's serial.
_PLAIN, _NODE, _TUPLE, _NODES, _SERIAL = 0, 1, 2, 3, 4

_SETTERS: dict[tuple[tuple[str, int], ...], Any] = {}


def _setter(fields: tuple[tuple[str, int, Any], ...]) -> Any:
    """A function that sets a new node's fields of this layout (slot names and kinds) from its
    values, compiled once per layout: plain attribute stores instead of a `setattr` and a
    branch per field (copying the imports' nodes is part of every program's load)."""
    layout = tuple((s, how) for s, how, _ in fields)
    hit = _SETTERS.get(layout)
    if hit is not None:
        return hit
    lines = ["def set_fields(n, gid, v, new, serial):", "    n.gid = gid"]
    for i, (s, how) in enumerate(layout):
        assert s.isidentifier(), s
        value = {_PLAIN: f"v[{i}]", _NODE: f"new[v[{i}]]", _SERIAL: "serial",
                 _NODES: f"tuple([new[k] for k in v[{i}]])",
                 _TUPLE: f"tuple([new[x] if is_node else x for is_node, x in v[{i}]])"}[how]
        lines.append(f"    n.{s} = {value}")
    scope: dict[str, Any] = {}
    exec("\n".join(lines), scope)  # noqa: S102 — generated from slot names only
    hit = _SETTERS[layout] = scope["set_fields"]
    return hit


# what a copy does not take: a node's weak references, and caches kept on a node for its
# current contents (scan_mut's), which the copy finds again for its own
_NOT_COPIED = frozenset({"__weakref__", "_scans"})


def _slots(cls: type) -> tuple[str, ...]:
    hit = _SLOTS.get(cls)
    if hit is None:
        names: list[str] = []
        for k in cls.__mro__:
            for s in getattr(k, "__slots__", ()):
                if s not in _NOT_COPIED and s not in names:
                    names.append(s)
        hit = _SLOTS[cls] = tuple(names)
    return hit


def _defs_in(value: Any) -> list[Def]:
    if isinstance(value, Def):
        return [value]
    if isinstance(value, tuple):
        return [x for x in value if isinstance(x, Def)]
    return []


class CopyPlan:
    """Every node of `base` (and of `roots`, the caller's own references into it), in id order,
    with how each field is copied: made once, then `copy_into` as often as needed."""

    def __init__(self, base: World, roots: list[Def]) -> None:
        self.base = base
        self.univ, self.nat = base.univ(), base.nat()
        nodes = sorted(self._reachable(base, roots), key=lambda d: d.gid)
        # index of each node; univ and nat are -1 and -2 (the target's own)
        self.index: dict[int, int] = {id(d): i for i, d in enumerate(nodes)}
        self.index[id(self.univ)], self.index[id(self.nat)] = -1, -2
        self.nodes = nodes
        self.by_gid = {d.gid: i for i, d in enumerate(nodes)}
        # what copy_into runs for each node: its class, the setter of its layout, the values
        self.makes = [self._make(d) for d in nodes]
        # the hash-consing table: (class, extra, indices of the operands, index of the node)
        idx = self.index
        self.table = [(key[0], key[1], tuple(idx[k] for k in key[2:]), idx[id(d)])
                      for key, d in base._table.items() if d is not self.univ and d is not self.nat]

    def _reachable(self, base: World, roots: list[Def]) -> list[Def]:
        stack: list[Def] = [*base._table.values(), *base.muts, *base.annexes.values(),
                            *base.externals.values(), *base.c_functions.values(), *base.pipeline_defs.values(),
                            *base.rec_defs.keys(), *base.rec_defs.values(), *roots]
        for key, rule in base.rule_defs.items():
            stack.append(key)
            stack.extend(x for f in dataclasses.fields(rule) for x in _defs_in(getattr(rule, f.name)))
        for app, res in (base.folds or {}).values():
            stack.extend((app, res))
        seen: dict[int, Def] = {}
        while stack:
            d = stack.pop()
            if id(d) in seen:
                continue
            seen[id(d)] = d
            for s in _slots(type(d)):
                stack.extend(_defs_in(getattr(d, s, None)))
        return [d for d in seen.values() if d is not self.univ and d is not self.nat]

    def _make(self, d: Def) -> tuple[type, Any, tuple[Any, ...]]:
        fields = self._fields(d)
        return type(d), _setter(fields), tuple(v for _, _, v in fields)

    def _fields(self, d: Def) -> tuple[tuple[str, int, Any], ...]:
        out: list[tuple[str, int, Any]] = []
        for s in _slots(type(d)):
            if s == "gid":
                continue
            try:
                v = getattr(d, s)
            except AttributeError:  # a slot never set stays unset
                continue
            if isinstance(v, Def):
                out.append((s, _NODE, self.index[id(v)]))
            elif isinstance(v, tuple) and v and all(isinstance(x, Def) for x in v):
                out.append((s, _NODES, tuple(self.index[id(x)] for x in v)))
            elif isinstance(v, tuple) and any(isinstance(x, Def) for x in v):
                out.append((s, _TUPLE, tuple((True, self.index[id(x)]) if isinstance(x, Def) else (False, x)
                                             for x in v)))
            elif s == "home" and v == self.base.serial:
                out.append((s, _SERIAL, None))  # the target's serial
            else:
                out.append((s, _PLAIN, v))
        return tuple(out)

    def copy_into(self, target: World) -> WorldCopy:
        if target.num_nodes != 2 or target.muts:
            raise ValueError("a World is copied only into a fresh one")
        new: list[Def] = [object.__new__(cls) for cls, _, _ in self.makes]
        new.append(target.nat())  # index -2
        new.append(target.univ())  # index -1
        serial = target.serial
        gid = defs._gid
        for n, (_, setter, values) in zip(new, self.makes):
            setter(n, next(gid), values, new, serial)
        copy = WorldCopy(self, new)
        copy.fill(target)
        return copy


class WorldCopy:
    """One copy made by a CopyPlan: `node` maps a node of the base to its copy."""

    def __init__(self, plan: CopyPlan, new: list[Def]) -> None:
        self.plan = plan
        self._new = new

    def node(self, d: Def) -> Def:
        return self._new[self.plan.index[id(d)]]

    def fill(self, t: World) -> None:
        """The World's tables, each entry's nodes replaced by their copies."""
        base, m = self.plan.base, self.node
        new = self._new
        ids = [id(x) for x in new]
        table = t._table
        for cls, extra, ops, i in self.plan.table:
            # (class, extra, ids of the operands): the ids of the operands' copies
            table[(cls, extra, *[ids[k] for k in ops])] = new[i]
        t.annexes.update({k: m(v) for k, v in base.annexes.items()})
        t.annex_docs.update(base.annex_docs)
        t.normalizers.update(base.normalizers)
        t.muts.extend(cast(MutLam, m(x)) for x in base.muts)
        t.externals.update({k: m(v) for k, v in base.externals.items()})  # type: ignore[misc]
        if base.folds is not None:
            t.folds = {m(app).gid: (m(app), m(res)) for app, res in base.folds.values()}  # type: ignore[misc]
        t.pipeline_defs.update({k: m(v) for k, v in base.pipeline_defs.items()})
        t.pipeline_locs.update(base.pipeline_locs)
        t.c_functions.update({k: m(v) for k, v in base.c_functions.items()})  # type: ignore[misc]
        t.rec_defs.update({m(k): m(v) for k, v in base.rec_defs.items()})
        t.rule_defs.update({m(k): RuleDef(**{f.name: _copied(m, getattr(r, f.name)) for f in dataclasses.fields(r)})
                            for k, r in base.rule_defs.items()})
        by_gid = self.plan.by_gid
        t._levels.update({new[by_gid[g]].gid: lvl for g, lvl in base._levels.items() if g in by_gid})


def _copied(m: Any, value: Any) -> Any:
    if isinstance(value, Def):
        return m(value)
    if isinstance(value, tuple):
        return tuple(m(x) if isinstance(x, Def) else x for x in value)
    return value
