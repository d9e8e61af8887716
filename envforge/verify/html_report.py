"""``envforge verify --html report.html``: every group of a run on one self-contained page.

One section per group (most fundamental first): what differs and how often, the minimal input
(seed, actions, state before), both sides' values side by side, the plain-words explanations,
the port's and the reference's lines, and a plot of both sides' values of the differing fields
around the divergence, drawn as inline SVG. The page loads nothing: no script, no stylesheet,
no font, no image from anywhere (it opens on a machine with no network). Everything a side
wrote is shown as text (control characters escaped, then HTML-escaped).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from envforge.untrusted.shown import visible
from envforge.verify.findings import Finding
from envforge.verify.groups import Group
from envforge.verify.verdict import Report

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:rgb(34,34,34)}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:2em;border-top:1px solid silver;padding-top:1em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid gainsboro;padding:.2em .5em;
vertical-align:top;font-size:.9em} th{background:whitesmoke;text-align:left}
pre{background:whitesmoke;padding:.5em;overflow-x:auto;font-size:.85em}
.ref{color:rgb(31,95,191)} .port{color:rgb(192,57,43)} .dim{color:gray}
svg{background:white;border:1px solid gainsboro;margin:.3em .6em .3em 0}
"""
PLOTS_PER_GROUP = 4
WIDTH, HEIGHT, PAD = 360, 180, 34


def _text(value: Any) -> str:
    return html.escape(visible(value))


def _short(value: Any, limit: int = 400) -> str:
    text = visible(value)
    return html.escape(text if len(text) <= limit else text[: limit - 3] + "...")


def trajectories(finding: Finding) -> list[tuple[str, list[float], list[float], list[float]]]:
    """(label, x, reference values, port values) per plotted series: a recorded trajectory
    (a rollout's steps around the divergence) when the finding has one, else the one step
    from the state before (before, then each side's after), else an array's elements."""
    out: list[tuple[str, list[float], list[float], list[float]]] = []
    recorded = finding.extra.get("trajectory")
    if isinstance(recorded, dict):
        steps = [float(s) for s in recorded.get("steps", [])]
        for name, sides in recorded.get("fields", {}).items():
            out.append((name, steps, _floats(sides["reference"]), _floats(sides["port"])))
        return out[:PLOTS_PER_GROUP]
    expected, actual = finding.expected or {}, finding.actual or {}
    before = finding.state_before or {}
    for name, want in expected.items():
        got = actual.get(name)
        a, b = np.asarray(want, dtype=object), np.asarray(got, dtype=object)
        if a.size == 1 and b.size == 1 and _numeric(want) and _numeric(got):
            step = float(finding.step or 0)
            if name in before and _numeric(before[name]):
                x, start = [step, step + 1], [float(np.asarray(before[name], float))]
                out.append((name, x, start + [_f(want)], start + [_f(got)]))
            else:
                out.append((name, [step + 1], [_f(want)], [_f(got)]))
        elif a.shape == b.shape and a.size > 1 and _numeric(want) and _numeric(got):
            x = [float(j) for j in range(a.size)]
            out.append((f"{name} by element", x, _floats(want), _floats(got)))
    return out[:PLOTS_PER_GROUP]


def _numeric(value: Any) -> bool:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(np.isfinite(array).all())


def _f(value: Any) -> float:
    return float(np.asarray(value, dtype=float).reshape(-1)[0])


def _floats(value: Any) -> list[float]:
    return [float(v) for v in np.asarray(value, dtype=float).reshape(-1)]


def svg_plot(label: str, x: list[float], ref: list[float], port: list[float]) -> str:
    """Both sides' values as two lines (reference solid, port dashed) with their points."""
    values = ref + port
    lo, hi = min(values), max(values)
    if hi == lo:
        lo, hi = lo - 1.0, hi + 1.0
    x_lo, x_hi = (min(x), max(x)) if x else (0.0, 1.0)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1.0, x_hi + 1.0

    def px(v: float) -> float:
        return PAD + (v - x_lo) / (x_hi - x_lo) * (WIDTH - 2 * PAD)

    def py(v: float) -> float:
        return HEIGHT - PAD - (v - lo) / (hi - lo) * (HEIGHT - 2 * PAD)

    parts = [
        f'<svg width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        f"<title>{_text(label)}: reference and port</title>",
        f'<text x="{PAD}" y="16" font-size="12">{_text(label)}</text>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="darkgray"/>',
        f'<text x="2" y="{py(hi) + 4:.1f}" font-size="10">{hi:.4g}</text>',
        f'<text x="2" y="{py(lo) + 4:.1f}" font-size="10">{lo:.4g}</text>',
        f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="10">{x_lo:g}</text>',
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" font-size="10" text-anchor="end">'
        f"{x_hi:g}</text>",
    ]
    for values_, color, dash, name in (
        (ref, "rgb(31,95,191)", "", "reference"),
        (port, "rgb(192,57,43)", ' stroke-dasharray="5,3"', "port"),
    ):
        points = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, values_, strict=False))
        parts.append(
            f'<polyline class="{name}" fill="none" stroke="{color}" stroke-width="1.5"{dash} '
            f'points="{points}"/>'
        )
        parts += [
            f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="2.5" fill="{color}"/>'
            for a, b in zip(x, values_, strict=False)
        ]
    parts.append(
        f'<text x="{WIDTH - PAD}" y="16" font-size="10" text-anchor="end">'
        '<tspan fill="rgb(31,95,191)">reference</tspan> / <tspan fill="rgb(192,57,43)">port</tspan></text>'
    )
    return "".join(parts) + "</svg>"


def _lines_table(title: str, locs: list[Any]) -> str:
    if not locs:
        return ""
    rows = "\n".join(f"{_text(Path(loc.file).name)}:{loc.line}: {_text(loc.text)}" for loc in locs)
    return f"<h3>{title}</h3><pre>{rows}</pre>"


def _section(number: int, group: Group) -> str:
    f = group.finding
    levels = ", ".join(f"L{n}" for n in sorted(group.levels))
    out = [
        f'<section class="group" id="group-{number}">',
        f"<h2>{number}. {_text(group.cause)} <span class='dim'>({_text(f.check)}, {levels}, "
        f"seen {group.count} time{'s' * (group.count != 1)})</span></h2>",
        f"<p>{_text(f.message)}</p>",
        "<h3>Minimal input</h3><table>",
        f"<tr><th>seed</th><td>{_text(f.seed)}</td></tr>",
        f"<tr><th>step</th><td>{_text(f.step)}</td></tr>",
        f"<tr><th>actions ({len(f.actions)})</th><td>{_short(f.actions)}</td></tr>",
    ]
    for name, value in (f.state_before or {}).items():
        out.append(f"<tr><th>before: {_text(name)}</th><td>{_short(value)}</td></tr>")
    out.append("</table>")
    if f.expected is not None:
        out.append("<h3>Both sides</h3><table><tr><th>field</th><th class='ref'>reference</th>")
        out.append("<th class='port'>port</th><th>abs error</th></tr>")
        for name, want in f.expected.items():
            got = (f.actual or {}).get(name, "(missing)")
            error = f.error.get(name, "")
            out.append(
                f"<tr><td>{_text(name)}</td><td class='ref'>{_short(want)}</td>"
                f"<td class='port'>{_short(got)}</td><td>{_text(error)}</td></tr>"
            )
        out.append("</table>")
    plain = f.extra.get("explanations", [])
    if plain:
        out.append("<h3>In plain words</h3><ul>")
        out += [f"<li>{_text(text)}</li>" for text in plain]
        out.append("</ul>")
    plots = trajectories(f)
    if plots:
        out.append("<h3>Around the divergence</h3><div class='plots'>")
        out += [svg_plot(*plot) for plot in plots]
        out.append("</div>")
    out.append(_lines_table("Port lines", f.port_lines))
    out.append(_lines_table("Reference lines", f.reference_lines))
    for follows in f.extra.get("may_follow", []):
        out.append(
            f"<p class='dim'>May follow from it: {_text(follows['cause'])} "
            f"({follows['count']} transitions whose step reads {_text(follows['reads'])})</p>"
        )
    if f.detail:
        out.append(f"<h3>Detail</h3><pre>{_short(f.detail, 4000)}</pre>")
    out.append("</section>")
    return "\n".join(out)


def render_html(report: Report) -> str:
    """The whole page."""
    groups = report.groups()
    levels = "".join(
        f"<tr><td>L{lv.level} {_text(lv.name)}</td><td>{_text(lv.status)}</td>"
        f"<td>{lv.wall_s:.1f} s</td><td>{_short(lv.summary)}</td></tr>"
        for lv in report.levels
    )
    head = (
        f"<h1>envforge verify {_text(report.env)}</h1>"
        f"<p>{_text(report.port)} against {_text(report.reference)}: "
        f"<strong>{_text(report.verdict)}</strong></p>"
        f"<p>{_text(report.groups_line() or 'No difference found.')}</p>"
        "<table><tr><th>level</th><th>status</th><th>time</th><th>summary</th></tr>"
        f"{levels}</table>"
    )
    sections = "\n".join(_section(n, g) for n, g in enumerate(groups, start=1))
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>envforge verify {_text(report.env)}</title><style>{STYLE}</style></head>"
        f"<body>\n{head}\n{sections}\n</body></html>\n"
    )
