"""The `compile` plugin's normalizer: `compile.is_loaded "p"` is `tt` where the plugin `p` is
loaded, else `ff` — folded when the application is built, as upstream's
(`src/mim/plug/compile/normalizers.cpp`), so that `core.select (compile.is_loaded "p", phase,
compile.null_phase)` (upstream opt.mim's `cond_phase`) names one phase by the time a pipeline
is read."""
from __future__ import annotations

from verimim.ir.defs import App, Def, Lit, Pack, Tuple
from verimim.ir.world import World


def string_literal(d: Def) -> str | None:
    """A string literal's text (its NUL, if written, dropped: C strings), else None."""
    elems = d.ops if isinstance(d, Tuple) else (d.body,) * d.shape.value \
        if isinstance(d, Pack) and isinstance(d.shape, Lit) and isinstance(d.shape.value, int) and not d.body.bvd \
        else (d,)
    if not all(isinstance(e, Lit) and isinstance(e.value, int) for e in elems):
        return None
    return bytes(e.value for e in elems if isinstance(e, Lit)).decode(errors="replace").rstrip("\0")


def plugin_loaded(world: World, plugin: str) -> bool:
    """Whether the World holds annexes of `plugin` (it is loaded)."""
    return any(a.startswith(plugin + ".") for a in world.annexes)


def _is_loaded(w: World, app: App) -> Def | None:
    name = string_literal(app.arg)
    return None if name is None else w.lit_bool(plugin_loaded(w, name))


def register(world: World) -> None:
    world.register_normalizer("compile.is_loaded", 2, _is_loaded)
