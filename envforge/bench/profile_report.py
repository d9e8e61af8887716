"""``envforge profile``: the host's view of a profile. ``run_profile``
(``envforge/bench/profile.py``) computes it inside the sandbox the user chose (a spawned process
only under ``--sandbox none``); it comes back as plain data, checked for its form here, then
shown as a table or JSON, every string of it as data (``untrusted/shown.py``). Its figures are informational, like ``envforge bench``'s: measured
inside the sandbox, they decide nothing."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from envforge.errors import EnvforgeError
from envforge.untrusted.shown import one_line, shown

MAX_ROWS = 5000


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def checked(result: Any) -> dict[str, Any]:
    """``result`` if it has the profile's form (plain numbers and strings where expected)."""
    bad = EnvforgeError("the profile job sent a result of no known form")
    if not isinstance(result, dict) or not isinstance(result.get("lines"), list):
        raise bad
    if not all(_number(result.get(k)) for k in ("batch", "step_s", "compile_s")):
        raise bad
    xla = result.get("xla")
    if not isinstance(xla, dict) or not all(_number(v) for v in xla.values()):
        raise bad
    rows, loops = result["lines"], result.get("loops")
    if len(rows) > MAX_ROWS or not isinstance(loops, list) or len(loops) > MAX_ROWS:
        raise bad
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("line"), str):
            raise bad
        if not isinstance(row.get("text"), str) or not all(
            _number(row.get(k)) for k in ("share", "flops", "bytes", "selects", "eqns")
        ):
            raise bad
    return result


def render(profile: dict[str, Any], console: Console, top: int = 15) -> None:
    xla, batch, step_s = profile["xla"], profile["batch"], profile["step_s"]
    said = (
        f"{profile['env']} port {profile['port_file']}: "
        f"{profile.get('profiled', 'one jit(vmap(step)) call')} at batch "
        f"{batch} takes {step_s * 1e6:,.1f} us ({batch / step_s:,.0f} steps/s, "
        f"median of {profile['timed_calls']} calls on {profile['device']}; compile "
        f"{profile['compile_s']:.2f} s)"
    )
    console.print(shown(one_line(said)))
    console.print(
        "XLA cost analysis of the compiled call: "
        f"{xla.get('flops', 0):,.0f} flops, "
        f"{xla.get('transcendentals', 0):,.0f} transcendentals, "
        f"{xla.get('bytes', 0):,.0f} bytes accessed",
        highlight=False,
    )
    title = f"top lines by share (of flops + bytes/{profile['bytes_per_unit']})"
    table = Table(title=shown(one_line(title)))
    for name in ("share", "line", "flops", "bytes", "selects", "gathers", "source"):
        table.add_column(name, justify="right" if name not in ("line", "source") else "left")
    for row in profile["lines"][:top]:
        table.add_row(
            f"{row['share']:.1%}",
            shown(one_line(row["line"])),
            f"{row['flops']:,.0f}",
            f"{row['bytes']:,.0f}",
            f"{row['selects']:,.0f}",
            f"{row.get('gathers', 0):,.0f}",
            shown(one_line(row["text"][:70])),
        )
    console.print(table)
    selects = sum(row["selects"] for row in profile["lines"])
    console.print(
        f"select_n: {selects:,.0f} (under vmap a cond on a batched predicate runs both "
        f"branches and selects); conds left as conds: {profile.get('conds', 0)}",
        highlight=False,
    )
    gathers = sum(row.get("gathers", 0) for row in profile["lines"])
    if gathers:
        console.print(
            f"gathers and scatters: {gathers:,.0f} (indexed reads and writes; with a batched "
            "index XLA:CPU runs each element by element, a cost the share above does not "
            "weigh: a small constant table may be cheaper as arithmetic, "
            "speed_layer.flag_lookup)",
            highlight=False,
        )
    for loop in profile["loops"]:
        trips, measured = loop.get("trips"), loop.get("measured_trips")
        if isinstance(trips, int):
            said = f"{trips:,} trips (static)"
        elif _number(measured):
            said = (
                f"{measured:,.1f} trips a run, measured at batch {profile['batch']} over "
                f"{loop.get('runs')} run(s), the longest {loop.get('max_trips')} (under vmap the "
                "batch's longest env sets it)"
            )
        else:
            said = "trips depend on data, not measured (counted once)"
        console.print(shown(one_line(f"{loop.get('kind')} at {loop.get('line')}: {said}")))


def render_rust(profile: dict[str, Any], console: Console, top: int = 15) -> None:
    """A Rust port's profile (``bench/profile_rust.py``): by EnvBatch method, then by function."""
    batch = profile["batch"]
    said = (
        f"{profile['env']} Rust port {profile['port_file']}: one EnvBatch.step at batch "
        f"{batch} takes {profile['step_s'] * 1e6:,.1f} us; the loop runs "
        f"{profile['steps_per_s']:,.0f} steps/s over {profile['calls']} calls"
    )
    console.print(shown(one_line(said)))
    console.print(shown(one_line(f"loop: {profile.get('loop', 'step, reset_where, observe')}")))
    methods = Table(title="time by EnvBatch method (the job's clock around each call)")
    for name in ("share", "method", "seconds", "calls"):
        methods.add_column(name, justify="left" if name == "method" else "right")
    for row in profile["methods"]:
        calls = row.get("calls")
        methods.add_row(
            f"{row['share']:.1%}",
            shown(one_line(row["method"])),
            f"{row['seconds']:.3f}",
            f"{calls or '-'}",
        )
    console.print(methods)
    if profile.get("include_reset"):
        console.print(
            "reset: --include-reset's second batch, reset whole once per loop step (not in "
            "the loop's steps/s; its share is of all the time above)",
            highlight=False,
        )
    console.print(shown(one_line(f"by function: {profile['sampling']}")))
    if profile["functions"]:
        table = Table(title="top functions by share of samples (inlined code counts in its caller)")
        for name in ("share", "function", "object"):
            table.add_column(name, justify="right" if name == "share" else "left")
        for row in profile["functions"][:top]:
            table.add_row(
                f"{row['share']:.1%}",
                shown(one_line(row["function"][:90])),
                shown(one_line(row["dso"])),
            )
        console.print(table)
