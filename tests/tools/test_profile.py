"""`envforge bench --port P` times a candidate port beside the reference, and
`envforge profile` names the lines of a JAX port where one batched step spends its work, both
through the sandbox's door (a sandboxed job; the process sandbox here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from envforge.sandbox.confine import probe

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = ROOT / "generated/cartpole/jax"
needs_mounts = pytest.mark.skipif(
    not probe().read_only_mounts, reason="this kernel refuses mount namespaces"
)


def copy_port(tmp_path: Path) -> Path:
    folder = tmp_path / "candidate"
    shutil.copytree(CARTPOLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@needs_mounts
def test_bench_times_a_candidate_port_beside_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = copy_port(tmp_path)
    args = ["bench", "cartpole", "--port", str(port), "--target", "jax", "--batch", "8"]
    args += ["--repeats", "1", "--min-run", "0.01", "--policy", "random", "--resets", "fresh"]
    args += ["--steps-per-call", "64", "--speed-layer", "on", "--sandbox", "process", "--json"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err[-3000:]
    roles = {m["role"] for m in json.loads(out)["measurements"]}
    assert roles == {"reference", "port"}, roles


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "cartpole", "--port", "{tmp}/missing"], "no such file or folder"),
        (
            ["bench", "cartpole", "--port", "{port}", "--target", "rust"],
            "is a jax port, not a rust",
        ),
        (["bench", "cartpole", "--port", "{tmp}/empty"], "cannot tell the port's target"),
        (["profile", "cartpole", "--port", "{tmp}/missing"], "no such file or folder"),
        (["profile", "acrobot", "--target", "rust"], "no rust port found for acrobot"),
        (["profile", "cartpole", "--target", "c"], "no profiler for C ports yet"),
        (["profile", "cartpole", "--target", "cobol"], "unsupported target 'cobol'"),
        (["bench", "cartpole", "--port", "{port}", "--target", "cobol"], "unsupported target"),
        (["profile", "cartpole", "--batch", "0"], "--batch"),
    ],
)
def test_a_bad_port_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    port = copy_port(tmp_path)
    (tmp_path / "empty").mkdir()
    filled = [a.format(tmp=tmp_path, port=port) for a in args]
    code, out, err = run_cli(filled, capsys)
    assert code == 2, (out, err)
    assert needle in err and len(err.strip().splitlines()) == 1, err


@needs_mounts
def test_profile_names_the_ports_lines_with_shares_summing_to_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["profile", "cartpole", "--target", "jax", "--batch", "8"]
    code, out, err = run_cli([*args, "--json", "--sandbox", "process"], capsys)
    assert code == 0, err[-3000:]
    profile = json.loads(out)
    lines = profile["lines"]
    assert abs(sum(row["share"] for row in lines) - 1.0) < 1e-6
    source = (CARTPOLE / "cartpole.py").read_text().splitlines()
    in_port = [row for row in lines if row["line"].startswith("cartpole.py:")]
    assert sum(row["share"] for row in in_port) > 0.8  # the port's own lines, not the harness
    for row in in_port:
        number = int(row["line"].split(":")[1])
        assert row["text"] == source[number - 1].strip()[:160]
    assert profile["batch"] == 8 and profile["step_s"] > 0 and profile["xla"]["flops"] > 0


def test_profile_counts_the_gathers_of_table_lookups(capsys: pytest.CaptureFixture[str]) -> None:
    """The own-key FrozenLake reads its map as ``STOPS[state.s]``, ``GOAL[s]``, ``STOPS[s]``:
    each a gather under vmap, counted on its line and said under the table; the shipped port
    reads them through ``speed_layer.flag_lookup`` and has none on those lines."""
    folder = ROOT / "tests/ports/frozenlake_ownkey"
    args = ["profile", "frozenlake", "--port", str(folder), "--batch", "8", "--sandbox", "process"]
    code, out, err = run_cli([*args, "--json"], capsys)
    assert code == 0, err[-3000:]
    rows = {row["text"]: row for row in json.loads(out)["lines"]}
    lookups = [row for text, row in rows.items() if "STOPS[" in text or "GOAL[" in text]
    assert len(lookups) >= 2 and all(row["gathers"] >= 1 for row in lookups), lookups
    code, out, err = run_cli(args, capsys)
    assert code == 0 and "gathers and scatters:" in out, err[-3000:]
    code, out, err = run_cli(["profile", "frozenlake", "--target", "jax", "--batch", "8",
                              "--sandbox", "process", "--json"], capsys)  # fmt: skip
    assert code == 0, err[-3000:]
    shipped = [row for row in json.loads(out)["lines"] if "flag_lookup" in row["text"]]
    assert shipped and all(row["gathers"] == 0 for row in shipped), shipped


def profile_with_costly_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], anchor: str, costly: str, *flags: str
) -> tuple[dict, str]:
    """The profile (``--json``) of a cartpole copy with the ``costly`` line put in place of
    ``anchor`` (before it where ``costly`` ends with it), and that line's ``file:line``."""
    port = copy_port(tmp_path)
    module = port / "cartpole.py"
    text = module.read_text()
    assert text.count(anchor) == 1
    module.write_text(text.replace(anchor, costly))
    number = module.read_text().splitlines().index(costly.splitlines()[0]) + 1
    args = ["profile", "cartpole", "--port", str(port), "--batch", "8", "--sandbox", "process"]
    code, out, err = run_cli([*args, *flags, "--json"], capsys)
    assert code == 0, err[-3000:]
    return json.loads(out), f"cartpole.py:{number}"


@needs_mounts
def test_profile_puts_an_expensive_line_on_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anchor = "    time = state.time + 1\n"
    costly = "    time = state.time + 1 + (jnp.ones((64, 64)) @ jnp.ones((64, 64)))[0, 0].astype(jnp.int32) * 0\n"
    profile, line = profile_with_costly_line(tmp_path, capsys, anchor, costly)
    top = profile["lines"][0]
    assert top["line"] == line and top["share"] > 0.5, top


def test_while_trips_are_measured_as_the_batchs_longest() -> None:
    import jax
    import jax.numpy as jnp

    from envforge.bench.loop_trips import while_trips

    def count_to(n: jax.Array) -> jax.Array:
        return jax.lax.while_loop(lambda c: c < n, lambda c: c + 1, jnp.int32(0))

    closed = jax.make_jaxpr(jax.vmap(count_to))(jnp.array([1, 5, 3], jnp.int32))
    (loop,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "while"]
    assert while_trips(closed, jnp.array([1, 5, 3], jnp.int32)) == {id(loop): [5]}


@needs_mounts
def test_profile_runs_a_hostile_port_inside_the_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_one_door import hostile_port, secret_file

    secret, told = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    port = hostile_port(tmp_path / "port", secret, marker)
    args = ["profile", "pong", "--port", str(port), "--batch", "8", "--sandbox", "process"]
    code, out, err = run_cli([*args, "--json"], capsys)
    assert code == 0, err[-3000:]
    assert json.loads(out)["lines"][0]["line"].startswith("pong.py:")  # it did run the port
    assert told not in out + err and not marker.exists()


@needs_mounts
def test_include_reset_weighs_a_costly_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`envforge profile` times step alone, where a cost in reset (Leduc's re-deal) never
    shows; `--include-reset` profiles the bench loop's step, reset of every env included."""
    anchor = "    return EnvState(x, x_dot, theta, theta_dot, jnp.int32(0))\n"
    costly = "    x = x + (jnp.ones((64, 64)) @ jnp.ones((64, 64)))[0, 0] * 0\n"
    profile, line = profile_with_costly_line(
        tmp_path, capsys, anchor, costly + anchor, "--include-reset"
    )
    top = profile["lines"][0]
    assert top["line"] == line and top["share"] > 0.5, top
    assert "reset of every env" in profile["profiled"]
