"""The package layout of OVERVIEW.md: every module imports, subpackages map to top-level folders."""
from __future__ import annotations

import importlib
import pkgutil

import verimim


def test_every_module_imports() -> None:
    names = [m.name for m in pkgutil.walk_packages(verimim.__path__, "verimim.")]
    for sub in ("phases", "smt", "fuzz", "runtime"):
        mod = importlib.import_module(f"verimim.{sub}")
        names += [m.name for m in pkgutil.walk_packages(mod.__path__, f"verimim.{sub}.")]
    assert "verimim.frontend.elab" in names
    for name in names:
        importlib.import_module(name)


def test_subpackages_live_in_top_level_folders() -> None:
    for sub in ("phases", "smt", "fuzz", "runtime"):
        mod = importlib.import_module(f"verimim.{sub}")
        assert mod.__file__ is not None and f"/{sub}/__init__.py" in mod.__file__.replace("\\", "/")
