"""The optimize step: ``envforge prompt --optimize`` writes a workspace whose
task is to make a verified port faster, with ./bench and ./profile beside ./verify; and
``translate --optimize`` keeps a round only if the port still verifies and the host measures it
faster, else puts the last kept port back."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from envforge.agents.loop import AgentLimits
from envforge.agents.scripted import ScriptedModel, reply
from envforge.cost.prices import user_price
from envforge.errors import BadInput
from envforge.spec import spec_for_name
from envforge.translate.job import TranslateJob, run_translate_job
from envforge.translate.orchestrate import RepairConfig
from envforge.verify.context import VerifyOptions
from envforge.workspace.optimize_workspace import write_optimize_workspace

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = ROOT / "generated" / "cartpole" / "jax" / "cartpole.py"
REWARD = "    reward = jnp.float32(1.0)\n"
PRICE = user_price("3", "15")


def test_optimize_workspace_starts_from_the_shipped_port_with_bench_profile_and_verify(
    tmp_path: Path,
) -> None:
    spec = spec_for_name("cartpole")
    config = write_optimize_workspace(spec, "jax", tmp_path / "ws", "0-3")
    root = config.root
    for script in ("verify", "bench", "profile"):
        assert os.access(root / script, os.X_OK), script
    assert (root / "port" / "cartpole.py").read_text() == CARTPOLE.read_text()
    assert not (root / "port" / "PROVENANCE.md").exists()
    task = (root / "AGENTS.md").read_text()
    assert task.startswith("# Make the cartpole JAX port faster")
    assert "./bench" in task and "./profile" in task and "./verify 0-3" in task
    assert f"bench cartpole --port {root}/port --target jax" in (root / "bench").read_text()
    assert f"profile cartpole --port {root}/port --target jax" in (root / "profile").read_text()
    assert "jax.lax.fori_loop" in task  # the JAX rules
    # what helpers playing the user's agent were misled by: the profile's shares are estimates,
    # the speed layer's offer, a timeout under load
    assert "not measured time" in task and "speed_layer.enabled()" in task
    assert "./verify 0-3 --timeout 600" in task
    assert "## When the verifier itself fails" in task  # the section ./verify's errors point to
    rust = write_optimize_workspace(spec, "rust", tmp_path / "rust", "0-3").root
    rust_task = (rust / "AGENTS.md").read_text()
    assert "# Make the cartpole Rust port faster" in rust_task
    assert "jnp" not in rust_task and "vmap" not in rust_task  # no JAX rules for a Rust port
    assert "not measured time" not in rust_task  # the JAX profile's caveat
    # no port to start from: one error line
    with pytest.raises(BadInput, match="no rust port found for acrobot"):
        write_optimize_workspace(spec_for_name("acrobot"), "rust", tmp_path / "other", "0-3")


@pytest.mark.slow
def test_optimize_workspace_bench_prints_the_port_and_the_reference(tmp_path: Path) -> None:
    config = write_optimize_workspace(spec_for_name("cartpole"), "jax", tmp_path / "ws")
    flags = [
        "--batch",
        "16",
        "--repeats",
        "1",
        "--min-run",
        "0.05",
        "--resets",
        "fresh",
        "--sandbox",
        "none",
        "--json",
    ]
    done = subprocess.run(
        [str(config.root / "bench"), *flags], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)["measurements"]
    rates = {row["role"]: row["sps"] for row in rows}
    assert set(rates) == {"reference", "port"} and min(rates.values()) > 0
    port_row = next(row for row in rows if row["role"] == "port")
    assert "port" in port_row["implementation"]


def _slowed(loops: int) -> str:
    """The shipped CartPole port with ``loops`` sines per step that change no result
    (0 * sin is 0, and 1 + 0 is 1): the same env, slower the more loops."""
    text = CARTPOLE.read_text()
    assert REWARD in text
    if loops == 0:
        return text
    waste = (
        f"    waste = jax.lax.fori_loop(0, {loops}, lambda i, v: jnp.sin(v + 1.0), state.x)\n"
        "    reward = jnp.float32(1.0) + jnp.float32(0.0) * waste\n"
    )
    return text.replace(REWARD, waste)


def _episode(loops: int, turn: int) -> list:
    write = ("write_file", {"path": "port/cartpole.py", "content": _slowed(loops)})
    return [
        reply(calls=[write], turn=turn),
        reply("Done.", turn=turn + 1),
        reply("Done, yes.", turn=turn + 1),  # after the reminder to verify
    ]


@pytest.mark.slow
def test_optimize_rounds_keep_only_verified_and_faster_ports(tmp_path: Path) -> None:
    """Translation: a port with 200 wasted sines a step. Round 2 makes it 3000 (verified, but
    the host measures it slower): undone, back to iteration 1. Round 3 removes the waste:
    verified and faster, kept; the report says by how much."""
    model = ScriptedModel(
        [*_episode(200, 1), *_episode(3000, 3), *_episode(0, 5)], name="scripted-optimize"
    )
    config = RepairConfig(
        levels=(0, 1),
        max_iters=1,
        agent=AgentLimits(max_steps=4, max_tokens=4000),
        verify=VerifyOptions(scale=0.01),
        optimize_rounds=2,
        throughput_batch=64,
    )
    job = TranslateJob(
        spec=spec_for_name("cartpole"),
        model="scripted-optimize",
        config=config,
        budget_usd=Decimal("1"),
        out=tmp_path / "out",
        workspace=tmp_path / "ws",
        job="optimize",
        ledger=tmp_path / "ledger.sqlite",
        price=PRICE,
    )
    result = run_translate_job(job, model=model).result
    assert result.status == "verified", result.message
    translated, slower, faster = result.iterations
    assert [it.kind for it in result.iterations] == ["translate", "optimize", "optimize"]
    assert all(it.verdict == "equivalent" for it in result.iterations)
    base = translated.steps_per_second or 0.0
    assert base > 0
    assert slower.finding.startswith("undone (not faster") and slower.finding.endswith(
        "back to iteration 1"
    )
    assert (slower.steps_per_second or 0.0) < base
    assert faster.finding.startswith("kept: ") and faster.finding.endswith("x iteration 1")
    assert (faster.steps_per_second or 0.0) > base
    # the port that lands is the kept one: no waste left
    landed = (tmp_path / "out" / "cartpole.py").read_text()
    assert "waste" not in landed and landed == CARTPOLE.read_text()
    # a rolled-back round restored iteration 1's port in between
    assert replace(slower, finding="").kind == "optimize"


def test_prompt_port_without_optimize_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        ["envforge", "prompt", "cartpole", "--port", str(CARTPOLE), "--out", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "only with --optimize" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists()
