"""The campaign report as one self-contained HTML page (inline CSS and SVG; no script, no
external resource, so it can be mailed or archived as it is)."""
from __future__ import annotations

from html import escape
from typing import Any

from verimim.fuzz.report import STATUSES

RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top;
         max-width: 24em; overflow-wrap: anywhere; }
th { background: #f0f0f0; overflow-wrap: normal; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.zero { background: #fde0e0; color: #a00; } td.hot { background: #e0f0e0; }
code { font-size: 0.9em; } .kpi { display: inline-block; margin-right: 2em; }
.kpi b { font-size: 1.5em; display: block; } .cols { display: flex; flex-wrap: wrap; gap: 2em; }
"""


def render_html(s: dict[str, Any]) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>verimim fuzz report: "
             f"{escape(s['campaign'])}</title><style>{_CSS}</style></head><body>",
             f"<h1>Fuzzing campaign <code>{escape(s['campaign'])}</code></h1>", _kpis(s),
             "<h2>Programs per second over time</h2>", _throughput_svg(s["throughput"]), _runs_table(s["runs"]),
             "<h2>Comparison with the previous run</h2>", _comparison(s["comparison"]),
             "<h2>Failures</h2>", _failures(s["failures"]),
             "<h2>Verdicts</h2>", _bars(s["verdicts"], "verdicts", good={"ok"}),
             "<h2>Coverage of the seed operations</h2>", _coverage(s["coverage"]["operations"], s["programs"]),
             "<h2>Phases by verdict status</h2>", _phases(s["phases"]),
             "<h2>Other generator features</h2>", _bars(s["coverage"]["features"], "features"),
             "</body></html>"]
    return "\n".join(parts)


def _kpis(s: dict[str, Any]) -> str:
    ops = s["coverage"]["operations"]
    covered = sum(1 for v in ops.values() if v)
    last = s["runs"][-1] if s["runs"] else None
    items = [("programs", s["programs"]), ("duplicates not checked again", s["duplicates"]),
             ("runs", len(s["runs"])), ("distinct failures", len(s["failures"])),
             ("seed operations covered", f"{covered} / {len(ops)}"),
             ("latest run, programs/s", last["per_second"] if last else "–")]
    return "<div>" + "".join(f"<span class='kpi'><b>{escape(str(v))}</b>{escape(k)}</span>" for k, v in items) + "</div>"


def _throughput_svg(points: list[dict[str, Any]]) -> str:
    if not points:
        return "<p>No programs yet.</p>"
    w, h, pad = 720, 240, 40
    tmax = max(p["t"] for p in points) or 1.0
    ymax = max(p["per_second"] for p in points) or 1.0
    out = [f"<svg id='throughput' xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' "
           f"style='background:#fafafa;border:1px solid #ddd'>"]
    for k in range(5):  # horizontal grid with labels
        y = h - pad - (h - 2 * pad) * k / 4
        out.append(f"<line x1='{pad}' y1='{y:.1f}' x2='{w - 10}' y2='{y:.1f}' stroke='#e4e4e4'/>"
                   f"<text x='4' y='{y + 4:.1f}' font-size='10'>{ymax * k / 4:.2f}</text>")
    out.append(f"<text x='{w / 2:.0f}' y='{h - 8}' font-size='11' text-anchor='middle'>seconds since the run "
               f"started (0 – {tmax:.0f})</text><text x='4' y='14' font-size='11'>programs/s</text>")
    runs = sorted({p["run"] for p in points})
    for i, run in enumerate(runs):
        pts = [p for p in points if p["run"] == run]
        xy = " ".join(f"{pad + (w - pad - 10) * p['t'] / tmax:.1f},{h - pad - (h - 2 * pad) * p['per_second'] / ymax:.1f}"
                      for p in pts)
        color = RUN_COLORS[i % len(RUN_COLORS)]
        out.append(f"<polyline class='run' fill='none' stroke='{color}' stroke-width='2' points='{xy}'/>")
        for pt in xy.split():  # a marker per interval: a run of one interval is a point, not a line
            x, y = pt.split(",")
            out.append(f"<circle cx='{x}' cy='{y}' r='3' fill='{color}'/>")
        out.append(f"<text x='{w - 90}' y='{20 + 14 * i}' font-size='11' fill='{color}'>run {run}</text>")
    out.append("</svg>")
    return "".join(out)


def _runs_table(runs: list[dict[str, Any]]) -> str:
    head = ("run", "started", "ended", "workers", "programs", "duplicates", "seconds", "programs/s", "per worker",
            "failures")
    rows = [[r["id"], r["started"], (r["ended"] or "") + _unfinished(r), r["workers"],
             r["programs"], r["duplicates"], r["seconds"], r["per_second"], r["per_second_per_worker"],
             sum(r["failures"].values())]
            for r in runs]
    return _table(head, rows, numeric={3, 4, 5, 6, 7, 8, 9})


def _unfinished(r: dict[str, Any]) -> str:
    if r["complete"]:
        return ""
    return " (running)" if r.get("running") else " (killed)"


def _comparison(c: dict[str, Any] | None) -> str:
    if c is None:
        return "<p>Only one run so far: nothing to compare with.</p>"
    rows = [["programs", *c["programs"]], ["programs/s", *c["per_second"]], ["failing programs", *c["failures"]]]
    out = _table(("", f"run {c['previous']}", f"run {c['latest']}"), rows, numeric={1, 2})
    lists = [("new failure signatures", c["new_signatures"]), ("signatures no longer seen", c["gone_signatures"]),
             ("newly covered", c["newly_covered"]), ("no longer covered", c["no_longer_covered"])]
    return out + "<ul>" + "".join(f"<li>{escape(k)}: {escape(', '.join(v)) or 'none'}</li>" for k, v in lists) + "</ul>"


def _failures(fs: list[dict[str, Any]]) -> str:
    if not fs:
        return "<p>No failure.</p>"
    head = ("signature", "kind", "code", "phase", "where", "programs", "first", "message", "reproduce",
            "size before", "size after", "reduction")
    rows = []
    for f in fs:
        reduced = f["size_after"] and not (f["reduce_status"] or "").startswith("not ")
        ratio = f"{f['size_before'] / f['size_after']:.1f}× " if reduced else ""
        rows.append([f["signature"], f["kind"], f["code"], f["phase"], f["where"], f["count"],
                     f"#{f['first_index']} (run {f['first_run']})", f["message"][:200],
                     f"<code>cd {escape(f['dir'])} &amp;&amp; {escape(f['command'])}</code>" +
                     (f"<br>reduced: <code>{escape(f['command'].replace('original.mim', 'reduced.mim'))}</code>"
                      if f["reduced"] else ""),
                     f"{f['size_before']} ch / {f['lines_before']} lines",
                     f"{f['size_after']} ch / {f['lines_after']} lines" if f["size_after"] else "",
                     f"{ratio}{f['reduce_status'] or 'pending'} ({f['reduce_s'] or 0} s)"])
    return _table(head, rows, numeric={5}, raw={8}, table_id="failures")


def _coverage(ops: dict[str, int], programs: int) -> str:
    order = sorted(ops.items(), key=lambda kv: (kv[1] > 0, kv[0]))  # never generated first
    rows = [[k, v, f"{100 * v / programs:.0f}%" if programs else ""] for k, v in order]
    return _table(("operation", "programs", "share"), rows, numeric={1, 2}, zero_col=1, table_id="coverage")


def _phases(phases: dict[str, dict[str, int]]) -> str:
    rows = [[name, *(counts.get(s, 0) for s in STATUSES)] for name, counts in sorted(phases.items())]
    return _table(("phase", *STATUSES), rows, numeric=set(range(1, len(STATUSES) + 1)), table_id="phases")


def _bars(counts: dict[str, int], ident: str, good: set[str] | None = None) -> str:
    """A bar per key; with `good` (the verdicts: `ok`), the others' bars are red (failures)."""
    if not counts:
        return "<p>none</p>"
    top = max(counts.values()) or 1
    w, row = 720, 16
    out = [f"<svg id='{ident}' xmlns='http://www.w3.org/2000/svg' width='{w}' height='{row * len(counts) + 6}'>"]
    for i, (k, v) in enumerate(counts.items()):
        y = i * row + 3
        out.append(f"<text x='0' y='{y + 11}' font-size='11'>{escape(k)}</text>"
                   f"<rect x='220' y='{y}' width='{max(1.0, 420 * v / top) if v else 0:.1f}' height='{row - 4}' "
                   f"fill='{'#4a90d9' if good is None or k in good else '#d62728'}'/>"
                   f"<text x='{226 + 420 * v / top:.1f}' y='{y + 11}' font-size='11'>{v}</text>")
    out.append("</svg>")
    return "".join(out)


def _table(head: tuple[str, ...], rows: list[list[Any]], numeric: frozenset[int] | set[int] = frozenset(),
           raw: frozenset[int] | set[int] = frozenset(), zero_col: int | None = None, table_id: str = "") -> str:
    ident = f" id='{table_id}'" if table_id else ""
    out = [f"<table{ident}><tr>" +
           "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        cells = []
        for i, v in enumerate(r):
            cls = "n" if i in numeric else ""
            if zero_col == i:
                cls += " zero" if v == 0 else " hot"
            text = str(v) if i in raw else escape(str(v))
            cells.append(f"<td class='{cls.strip()}'>{text}</td>" if cls else f"<td>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)
