"""Loading Mim files and plugins into one World.

`plugin X;` loads `X.mim` (its declarations), then the Python module `verimim.plug.X` if it
exists (normalizers and, later, run-time semantics and lowering); `import X;` loads the `.mim`
file only. Plugins resolve only in verimim's plugin directory and the user's `-I` directories;
a name that is not a plain identifier, or a file that is not found there, is `E-IMPORT`.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import re
import sys
from dataclasses import dataclass, field
from collections.abc import Sequence
from pathlib import Path

from verimim.diagnostics import NO_LOC, ImportError_, Loc, UsageError, VerimimError
from verimim.frontend.elab import AnnexTable, Elaborator
from verimim.frontend.scope import Entry, Lazy, Scope
from verimim.ir.copy import CopyPlan, WorldCopy
from verimim.ir.world import World
from verimim.syntax import ast
from verimim.syntax.parser import parse_module

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "plug"


def in_program(loc: Loc | None) -> bool:
    """Whether a place is in the user's program: known, and not in a shipped plugin's own file
    (a diagnostic about the program should point there, not at a declaration in core.mim)."""
    return loc is not None and bool(loc.line) and not _in_plugin_dir(str(loc.file))


@functools.lru_cache(maxsize=256)
def _in_plugin_dir(file: str) -> bool:
    # (asked for every heap block the interpreter makes: a path parsed once per file)
    return Path(file).parent == PLUGIN_DIR

_IDENT = re.compile(r"[_a-zA-Z][_0-9a-zA-Z]*\Z")

# The shipped plugins a program may name with `%` without a `plugin` line, as upstream, whose
# driver loads `compile` and, at its default optimisation level, `opt`, which imports the others
# (`buffer` and `btensor` are verimim's own: a program loads them). Loaded only where named.
IMPLICIT_PLUGINS = frozenset({"compile", "core", "mem", "gpu", "direct"})
# Plugins whose normalizers run however the program names them (`import compile;` too): upstream's
# driver always loads `compile` as a plugin (its `is_loaded` folds: verimim.plug.compile).
ALWAYS_A_PLUGIN = frozenset({"compile"})

# Elaboration recurses along the structure of terms; deep programs need a deep Python stack
# (the CLI runs the frontend on a thread with a large C stack, see verimim.driver).
sys.setrecursionlimit(max(sys.getrecursionlimit(), 200_000))


@dataclass
class Unit:
    """One elaborated file: its syntax, its top-level scope and where it came from."""

    path: str
    module: ast.Module
    scope: Scope
    plugin: str | None


@dataclass
class Loader:
    world: World
    include_dirs: list[Path] = field(default_factory=list)
    units: dict[str, Unit] = field(default_factory=dict)
    loading: set[str] = field(default_factory=set)
    plugin_dir: Path = PLUGIN_DIR  # the shipped plugins; searched before the user's -I dirs

    def __post_init__(self) -> None:
        self.annexes = AnnexTable(self.world)
        if self.world.folds is None:
            self.world.folds = {}  # what the normalizers fold while the program is built: `check` proves it

    def search_path(self) -> list[Path]:
        return [self.plugin_dir, *self.include_dirs]

    def find(self, name: str, loc: Loc, what: str = "plugin") -> Path:
        """The file of plugin or module (`import`) `name`, named so by `what` in errors."""
        if not _IDENT.match(name):
            raise ImportError_(f"`{name}` is not a {what} name: {what}s are named by an identifier "
                               f"and found only in the plugin directory and `-I` directories", loc)
        for d in self.search_path():
            cand = d / f"{name}.mim"
            if cand.is_file():
                return cand
        where = ", ".join(str(d) for d in self.search_path())
        raise ImportError_(f"{what} `{name}` not found (searched {where}; `-I DIR` adds a directory)", loc)

    def load_import(self, imp: ast.Import) -> None:
        if imp.name in self.units or imp.name in self.loading:
            return
        path = self.find(imp.name, imp.loc, "plugin" if imp.kind == "plugin" else "module")
        self.loading.add(imp.name)
        try:
            if imp.kind == "plugin" or imp.name in ALWAYS_A_PLUGIN:
                self._register_python(imp.name)
            text = path.read_text(encoding="utf-8")
            self.units[imp.name] = self.elaborate(text, str(path), plugin=imp.name)
        finally:
            self.loading.discard(imp.name)

    def _register_python(self, name: str) -> None:
        """The normalizers of plugin `name`'s Python module (verimim.plug.NAME), where it has one."""
        try:
            mod = importlib.import_module(f"verimim.plug.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"verimim.plug.{name}":
                raise
            return
        register = getattr(mod, "register", None)
        if register is not None:
            register(self.world)

    def elaborate(self, text: str, path: str, plugin: str | None) -> Unit:
        module = _parse_import(text, path) if plugin is not None else with_implicit_imports(parse_module(text, path), text)
        if plugin is None and module.imports and not self.units and self.world.num_nodes == 2:
            adopt_imports(self, module.imports)
        for imp in module.imports:
            self.load_import(imp)
        el = Elaborator(self.world, self.annexes, path, plugin)
        scope = Scope(self.imported_names(module))
        el.elab_module(module, scope)
        return Unit(path, module, scope, plugin)

    def imported_names(self, module: ast.Module) -> Scope | None:
        """As upstream, where an import puts the imported module's declarations into the
        importer: the plain top-level names of every imported file (and of what it imports),
        nearest first. The file's own declarations shadow them."""
        if not module.imports:
            return None
        names = Scope()
        for imp in module.imports:
            unit = self.units.get(imp.name)
            s: Scope | None = unit.scope if unit is not None else None
            while s is not None:
                for name, entry in s.names.items():
                    names.names.setdefault(name, entry)
                s = s.parent
        return names

    def load_file(self, path: str) -> Unit:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read `{path}`: {getattr(e, 'strerror', None) or e}") from None
        return self.elaborate(text, path, plugin=None)


def with_implicit_imports(module: ast.Module, text: str) -> ast.Module:
    """The module with a `plugin P;` added for each plugin of IMPLICIT_PLUGINS that it names with
    `%` (`%direct.cps2ds`) and does not load itself, in the order first named."""
    if "%" not in text:
        return module  # the common case, without walking the syntax tree
    loaded = {imp.name for imp in module.imports}
    added: list[ast.Import] = []
    for x in ast.nodes(module.decls):
        if isinstance(x, ast.Name) and x.percent and len(x.parts) > 1:
            p = x.parts[0]
            if p in IMPLICIT_PLUGINS and p not in loaded:
                loaded.add(p)
                added.append(ast.Import(x.loc, "plugin", p))
    if not added:
        return module
    return dataclasses.replace(module, imports=module.imports + tuple(added))


@dataclass
class _Imports:
    """What loading a file's imports into a fresh World made, kept for the next file with the
    same imports: the units (their scopes), the pending annexes, which file each unit was read
    from (with its text), and how to copy that World (which the plan keeps, never changed)."""

    units: dict[str, Unit]
    pending: dict[str, Lazy]
    files: tuple[tuple[str, str, str], ...]  # (unit name, path, text)
    plan: CopyPlan  # of the World they were loaded into


_IMPORTS: dict[tuple[object, ...], _Imports] = {}
_MAX_IMPORT_SETS = 16


def adopt_imports(loader: Loader, imports: Sequence[ast.Import]) -> None:
    """Give `loader` (on a fresh World) its file's imports as a copy of the last load of the
    same imports (verimim.ir.copy), when every file they read is still what it was; else
    nothing (the loader then loads them itself, reporting what is wrong with them)."""
    key = (type(loader), tuple((i.kind, i.name) for i in imports), tuple(map(str, loader.search_path())))
    kept = _IMPORTS.get(key)
    if kept is None or not _unchanged(loader, kept):
        kept = _load_imports(loader, imports)
        if kept is None:
            return
        if len(_IMPORTS) >= _MAX_IMPORT_SETS:
            _IMPORTS.pop(next(iter(_IMPORTS)))
        _IMPORTS[key] = kept
    copy = kept.plan.copy_into(loader.world)
    copied: dict[int, Scope] = {}
    for name, u in kept.units.items():
        loader.units[name] = Unit(u.path, u.module, _copy_scope(u.scope, copy, copied), u.plugin)
    loader.annexes.pending.update({k: _copy_lazy(z, copy) for k, z in kept.pending.items()})


def _load_imports(loader: Loader, imports: Sequence[ast.Import]) -> _Imports | None:
    fresh = type(loader)(World(), list(loader.include_dirs), plugin_dir=loader.plugin_dir)
    try:
        for imp in imports:
            fresh.load_import(imp)
    except VerimimError:
        return None
    entries = [e for u in fresh.units.values() for e in _entries(u.scope)] + list(fresh.annexes.pending.values())
    roots = [e.value if isinstance(e, Lazy) else e for e in entries]
    if any(r is None for r in roots):
        return None  # a declaration left unelaborated (or failed): not kept
    files = tuple((name, u.path, Path(u.path).read_text(encoding="utf-8")) for name, u in fresh.units.items())
    return _Imports(fresh.units, dict(fresh.annexes.pending), files,
                    CopyPlan(fresh.world, [r for r in roots if r is not None]))


def _unchanged(loader: Loader, kept: _Imports) -> bool:
    """Whether each import still resolves to the same file with the same text."""
    for name, path, text in kept.files:
        try:
            found = loader.find(name, NO_LOC)
            if str(found) != path or found.read_text(encoding="utf-8") != text:
                return False
        except (VerimimError, OSError, UnicodeDecodeError):
            return False
    return True


def _entries(scope: Scope | None) -> list[Entry]:
    out: list[Entry] = []
    while scope is not None:
        out.extend(scope.names.values())
        scope = scope.parent
    return out


def _copy_lazy(z: Lazy, copy: WorldCopy) -> Lazy:
    out = Lazy(z.name, z.loc, z.thunk)
    out.value = copy.node(z.value) if z.value is not None else None
    out.error = z.error
    return out


def _copy_scope(scope: Scope, copy: WorldCopy, copied: dict[int, Scope]) -> Scope:
    hit = copied.get(id(scope))
    if hit is not None:
        return hit
    out = Scope(_copy_scope(scope.parent, copy, copied) if scope.parent is not None else None)
    out.names = {k: _copy_lazy(e, copy) if isinstance(e, Lazy) else copy.node(e) for k, e in scope.names.items()}
    copied[id(scope)] = out
    return out


@functools.lru_cache(maxsize=64)
def _parse_import(text: str, path: str) -> ast.Module:
    """A plugin's syntax tree, parsed once per process for each text: every program imports
    the same plugins, and lexing and parsing them again was a third of loading a small program
    (the tree is immutable; each World elaborates it anew)."""
    return parse_module(text, path)


# Top-level definitions by which a program chooses its pipeline (verimim.phases.program_pipeline).
PIPELINE_NAMES = ("_compile", "host_specific_phases", "device_specific_phases")


def _record_pipeline(world: World, unit: Unit) -> None:
    for name in PIPELINE_NAMES:
        entry = unit.scope.names.get(name)
        if entry is not None:
            world.pipeline_defs[name] = entry.force() if isinstance(entry, Lazy) else entry
            # (where it is declared: a closed `lam` is an immutable node, with no place of its own)
            at = _declared_at(unit.module.decls, name)
            if at is not None:
                world.pipeline_locs[name] = at


def _declared_at(decls: tuple[ast.Decl, ...], name: str) -> Loc | None:
    """The place of the last top-level declaration of `name` (members of `rec … and …` too)."""
    found: Loc | None = None
    for d in decls:
        if isinstance(d, ast.DeclRec):
            found = _declared_at(d.decls, name) or found
        elif isinstance(d, (ast.DeclLam, ast.DeclRecVal)) and d.name == name:
            found = d.loc
        elif isinstance(d, ast.DeclLet) and isinstance(d.pattern, ast.PVar) and d.pattern.name == name:
            found = d.loc
    return found


def load_program(path: str, include_dirs: list[str] | None = None) -> tuple[World, Unit]:
    world = World()
    loader = Loader(world, [Path(d) for d in include_dirs or []])
    unit = loader.load_file(path)
    _record_pipeline(world, unit)
    return world, unit


def load_text(text: str, path: str = "<text>", include_dirs: list[str] | None = None) -> tuple[World, Unit]:
    world = World()
    loader = Loader(world, [Path(d) for d in include_dirs or []])
    unit = loader.elaborate(text, path, plugin=None)
    _record_pipeline(world, unit)
    return world, unit
