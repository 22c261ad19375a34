"""The `compile` plugin's normalizer: `compile.is_loaded "p"` is `tt` where the plugin `p` is
loaded, else `ff` — folded when the application is built, as upstream's
(`src/mim/plug/compile/normalizers.cpp`), so that `core.select (compile.is_loaded "p", phase,
compile.null_phase)` (upstream opt.mim's `cond_phase`) names one phase by the time a pipeline
is read."""
from __future__ import annotations

from verimim.ir.defs import App, Def, Lit, Pack, Tuple
from verimim.ir.world import World


def _name(d: Def) -> str | None:
    """A string literal's text (its NUL, if written, dropped), else None."""
    elems = d.ops if isinstance(d, Tuple) else (d.body,) * d.shape.value \
        if isinstance(d, Pack) and isinstance(d.shape, Lit) and isinstance(d.shape.value, int) and not d.body.bvd \
        else (d,)
    if not all(isinstance(e, Lit) and isinstance(e.value, int) for e in elems):
        return None
    return bytes(e.value for e in elems if isinstance(e, Lit)).decode(errors="replace").rstrip("\0")


def _is_loaded(w: World, app: App) -> Def | None:
    name = _name(app.arg)
    if name is None:
        return None
    return w.lit_bool(any(a.startswith(name + ".") for a in w.annexes))


def register(world: World) -> None:
    world.register_normalizer("compile.is_loaded", 2, _is_loaded)
