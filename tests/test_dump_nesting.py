"""`dump` prints a continuation in the `where` block of the innermost continuation whose
parameter it uses (verimim/dump.py `Dumper._parent`), so that the text parses back."""
from __future__ import annotations

from verimim.driver import run_with_big_stack
from verimim.fuzz import strategies as S


def _world() -> S.World:
    """top → after_launch (a) → joined (r4, uses a) → helper(…, after_atoi (v)) →
    helper(…, after_depth), which uses v, r4 and top's return. after_atoi and joined both have
    two free mutables, and joined was made last: the count alone chose joined for after_depth."""
    w = S.fresh_world()
    b = S._B(w)
    ret_t = w.cn(w.sigma([b.M0, b.I32]))
    helper, (hm, hx, hk) = b.con("helper", [("m", b.M0), ("x", b.I32), ("k", ret_t)])
    helper.body = w.app(hk, b.tup(hm, hx))
    top, (tm, tret) = b.con("top", [("m", b.M0), ("return", ret_t)])
    top.external = True
    w.externals["top"] = top
    after_atoi, (km, v) = b.con("after_atoi", [("m", b.M0), ("v", b.I32)])
    after_depth, (dm, r5) = b.con("after_depth", [("m", b.M0), ("r5", b.I32)])
    after_launch, (am, a) = b.con("after_launch", [("m", b.M0), ("a", b.I32)])
    joined, (jm, r4) = b.con("joined", [("m", b.M0), ("r4", b.I32)])
    top.body = w.app(after_launch, b.tup(tm, w.lit_idx(2 ** 32, 5)))
    after_launch.body = w.app(joined, b.tup(am, w.lit_idx(2 ** 32, 1)))
    joined.body = w.app(helper, b.tup(jm, b.wrap("add", 32, 0, a, r4), after_atoi))
    after_atoi.body = w.app(helper, b.tup(km, v, after_depth))
    after_depth.body = w.app(tret, b.tup(dm, b.wrap("add", 32, 0, b.wrap("add", 32, 0, r4, v), r5)))
    return w


def test_a_continuation_is_printed_inside_the_innermost_scope_it_uses() -> None:
    def go() -> tuple[str, str]:
        text = S.render(_world())
        return text, S.canonical(text)

    text, again = run_with_big_stack(go)
    assert again == text, text
    depth_line = next(line for line in text.splitlines() if "con after_depth" in line)
    atoi_line = next(line for line in text.splitlines() if "con after_atoi" in line)
    indent = len(depth_line) - len(depth_line.lstrip())
    assert indent > len(atoi_line) - len(atoi_line.lstrip()), text
