"""Prompt templates: strict rendering, translation prompts for pong and CartPole, repair prompts
filled from a Finding, run_verify output, optimize prompt and tool specs."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest

from envforge.coverage.lines import LineCoverage
from envforge.errors import BadInput
from envforge.prompts import render as prompts
from envforge.prompts.sources import reference_sources
from envforge.prompts.tools import tool_specs
from envforge.spec import EnvSpec, spec_for_name
from envforge.verify.findings import Finding, SourceLocation
from envforge.verify.verdict import LevelResult, Report

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pong() -> EnvSpec:
    return spec_for_name("pong")


def test_templates_refuse_missing_variables() -> None:
    with pytest.raises(jinja2.UndefinedError):
        prompts.render("missing_port.j2", error="no file")  # port_path not given
    with pytest.raises(BadInput):
        prompts.render("no_such_template.j2")
    with pytest.raises(BadInput, match="unsupported target"):
        prompts.target("cobol")


def test_pong_translation_prompt_has_source_spec_contract_and_rules(pong: EnvSpec) -> None:
    prompt = prompts.translation_prompt(pong, "jax", "port/pong.py", "0-3", "reference/")
    source = (ROOT / "references" / "pong" / "pong.c").read_text()
    assert source.strip() in prompt.context  # verbatim
    assert "### references/pong/pong.c" in prompt.context
    for name in pong.field_names:
        assert f"| {name} |" in prompt.context
    for function in ("reset(seed", "step(state", "observe(state", "to_canonical", "from_canonical"):
        assert function in prompt.context
    assert "Randomness: replicate" in prompt.context and "bit for bit" in prompt.context
    assert "Keep the reference's names" in prompt.context
    assert "No Python control flow on traced values" in prompt.context
    assert (
        "`port/pong.py`" in prompt.task and "reference/" in prompt.task and '"0-3"' in prompt.task
    )
    assert "run_verify" in prompt.system
    assert prompt.estimated_tokens() == -(-len(prompt.system + prompt.context + prompt.task) // 4)


def test_cartpole_prompt_shows_the_gymnasium_class_and_sync_randomness() -> None:
    cartpole = spec_for_name("cartpole")
    prompt = prompts.translation_prompt(cartpole, "jax", "port/cartpole.py")
    assert "class CartPoleEnv" in prompt.context and "def step(self, action)" in prompt.context
    assert "Randomness: sync" in prompt.context and "jax.random" in prompt.context
    assert "Comparison: tolerance" in prompt.context


def test_rust_prompt_renders(pong: EnvSpec) -> None:
    prompt = prompts.translation_prompt(pong, "rust", "port")
    assert "rayon" in prompt.context and "maturin" in prompt.context
    assert "Port this environment to Rust" in prompt.task


def _finding(workspace: Path) -> Finding:
    return Finding(
        level=1,
        check="step.mismatch",
        message=f"one step differs in ball_vy (port {workspace}/port/pong.py)",
        fields=["ball_vy"],
        seed=7,
        step=3,
        actions=[0, 2, 1, 1],
        state_before={"ball_y": 1.5, "ball_vy": -2.0},
        expected={"ball_vy": 2.0},
        actual={"ball_vy": -2.0},
        error={"ball_vy": 4.0, "ball_vy.ulp": 8388608.0},
        reference_lines=[
            SourceLocation(
                str(ROOT / "references/pong/pong.c"), 120, "  env->ball_vy = -env->ball_vy;"
            )
        ],
        port_lines=[SourceLocation(str(workspace / "port/pong.py"), 3, "ball_vy = ball_vy")],
        detail="shrunk from 40 steps",
    )


def _obs_finding(workspace: Path) -> Finding:
    return Finding(
        level=1,
        check="step.mismatch",
        message=f"one step differs in obs (port {workspace}/port/pong.py)",
        fields=["obs"],
        port_lines=[SourceLocation(str(workspace / "port/pong.py"), 9, "-state.ball_vx,")],
        extra={"cause": "obs", "count": 40},
    )


def test_repair_prompt_carries_the_localized_finding_with_relative_paths(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    report = Report(
        "pong", "pong.c", "port", [LevelResult(0, "pass"), LevelResult(1, "fail")], [0, 1, 2, 3]
    )
    text = prompts.repair_task(
        _finding(workspace),
        report,
        2,
        "port/pong.py",
        "a = 1\nb = 2\nball_vy = ball_vy\n",
        "0-3",
        [workspace, ROOT],
    )
    assert "### L1 properties: step.mismatch" in text
    assert "Fields that differ: ball_vy" in text
    assert "Reset seed: 7" in text and "Differing step: 3" in text
    assert "[0, 2, 1, 1]" in text
    assert "ball_y = 1.5" in text
    assert "ball_vy: expected 2.0, got -2.0 (abs error 4.0, 8388608.0 ulp)" in text
    assert "references/pong/pong.c:120: env->ball_vy = -env->ball_vy;" in text
    assert "port/pong.py:3: ball_vy = ball_vy" in text
    assert "3  ball_vy = ball_vy" in text  # the numbered listing
    assert "Levels: L0 pass, L1 fail." in text
    assert "shrunk from 40 steps" in text
    assert str(tmp_path) not in text and str(ROOT) not in text


def test_run_verify_output_and_optimize_prompt(tmp_path: Path) -> None:
    finding = _finding(tmp_path)
    failing = Report(
        "pong",
        "pong.c",
        "port",
        [
            LevelResult(0, "pass", "api ok"),
            LevelResult(1, "fail", "1 mismatch", [_obs_finding(tmp_path), finding]),
        ],
        [0, 1],
    )
    text = prompts.verify_result(failing, [tmp_path, ROOT])
    assert text.startswith("verdict: not equivalent")
    assert "L0 contract: pass — api ok" in text and "Fields that differ: ball_vy" in text
    # the state group in full, the observation group it may explain listed after it
    assert "found 1 other distinct difference, most fundamental first" in text
    assert "- obs (L1 step.mismatch, seen 40 times): one step differs in obs" in text
    assert "port line pong.py:9: -state.ball_vx" in text and str(tmp_path) not in text
    passing = Report("pong", "pong.c", "port", [LevelResult(0, "pass")], [0])
    assert "verdict: equivalent" in prompts.verify_result(passing, [tmp_path])
    optimize = prompts.optimize_task("port/pong.py", "0-3", 1234567.8, 4096, "cpu")
    assert "1,234,568 environment steps per second" in optimize and "4096" in optimize


def test_tool_specs_are_valid_schemas() -> None:
    specs = tool_specs(levels="0-2", wall_s=30, output_chars=500)
    assert [s.name for s in specs] == [
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "run_verify",
        "run_command",
    ]
    by_name = {s.name: s for s in specs}
    assert by_name["edit_file"].parameters["required"] == ["path", "old", "new"]
    assert (
        "30 s" in by_name["run_command"].description and "500" in by_name["run_command"].description
    )
    json.dumps([s.parameters for s in specs])


def test_rust_prompt_says_module_name_build_files_contract_and_error_types(pong: EnvSpec) -> None:
    context = prompts.translation_prompt(pong, "rust", "port").context
    assert '[lib]\nname = "pong_rust"' in context
    assert "#[pymodule] fn pong_rust" in context and "no `mod pong_rust;`" in context
    assert "`src/pong.rs` (`mod pong;` in lib.rs)" in context
    assert "no `pyproject.toml` is needed" in context
    assert (
        "reset(seeds) -> None  # seeds uint32[n]" in context
        and "Nothing returns observations" in context
    )
    assert "EnvBatch(0, strict_float=...)" in context and "Default (all-zero) envs" in context
    # a wrong dtype is PyO3's TypeError, as the example's typed arguments raise it
    assert "`PyValueError` for a wrong length or dtype" not in context
    assert "raise\n  `TypeError` by itself" in context and "PyReadonlyArray1<'_, i32>" in context
    for crate in ('pyo3 = { version = "0.30"', 'numpy = "0.30"', 'rayon = "1.10"'):
        assert crate in context
    assert "When the verifier itself fails" in context and "maturin not found" in context


def test_jax_prompt_says_what_from_canonical_receives_and_how_to_read_verifier_errors(
    pong: EnvSpec,
) -> None:
    context = prompts.translation_prompt(pong, "jax", "port/pong.py").context
    assert "`from_canonical` receives a dict of JAX arrays (traced values, never numpy" in context
    assert "never with `np.asarray`" in context
    assert "port failed: port build" in context and "do not rewrite working code" in context
    error = Report("pong", "pong.c", "port", [LevelResult(0, "error", "port failed")], [0])
    assert "When the verifier itself fails" in prompts.verify_result(error, [ROOT])


def test_prompts_leave_out_what_the_port_never_needs(pong: EnvSpec) -> None:
    context = prompts.translation_prompt(pong, "jax", "port/pong.py").context
    for noise in ("[l4]", "total_timesteps", "[[event]]", "[[policy]]", "[[state]]"):
        assert noise not in context  # the field table says what env.toml says about state
    cartpole = prompts.translation_prompt(spec_for_name("cartpole"), "jax", "port/c.py").context
    assert "pygame" not in cartpole and "def render" not in cartpole
    assert "# render(): drawing only, left out" in cartpole
    assert "def step(self, action)" in cartpole and "def reset(" in cartpole
    assert "| x | float64 | scalar | -2.4 .. 2.4 | state[0] |" in cartpole  # where it lives


def test_repair_prompt_ranks_and_cuts_the_assigning_lines(tmp_path: Path) -> None:
    port = str(tmp_path / "port/pong.py")
    finding = _finding(tmp_path)
    finding.port_lines = [
        SourceLocation(port, 3, "ball_vy = ball_vy"),
        SourceLocation(port, 1, "f32 = np.float32"),
        SourceLocation(port, 2, "jnp = jax.numpy"),
    ] + [SourceLocation(port, 10 + i, f"v{i} = state.ball_y * f32({i})") for i in range(20)]
    text = prompts.repair_task(finding, None, 1, "port/pong.py", None, "0-3", [tmp_path, ROOT])
    assert "port/pong.py:3: ball_vy = ball_vy" in text  # an alias of the field itself stays
    assert "f32 = np.float32" not in text and "jnp = jax.numpy" not in text
    shown = [line for line in text.splitlines() if line.startswith("  port/pong.py:")]
    assert len(shown) == prompts.LINES_SHOWN
    assert "(11 more lines that these read are not shown)" in text


def test_jax_prompt_tells_a_tape_port_how_to_take_its_draws() -> None:

    frozenlake = spec_for_name("frozenlake")
    text = prompts.translation_prompt(frozenlake, "jax", "port/frozenlake.py").context
    assert "step_with_draws(state: EnvState, action: jax.Array, draws: Draws)" in text
    assert "from envforge.kit import Draws" in text
    assert "rng.tape" in text and "when=condition" in text
    pong_text = prompts.translation_prompt(spec_for_name("pong"), "jax", "p.py").context
    assert "step_with_draws" not in pong_text  # only specs that draw inside step get the block


def test_prompt_shows_the_reference_files_the_spec_lists() -> None:
    """chip8.py assembles its game at import from asm.py and breakout.asm (env.toml ``sources``):
    a port from the prompt alone needs the ROM's source, so the prompt shows all three."""
    chip8 = spec_for_name("chip8")
    prompt = prompts.translation_prompt(chip8, "rust", "port")
    names = [s.name for s in reference_sources(chip8)]
    assert names == [f"references/chip8/{n}" for n in ("chip8.py", "asm.py", "breakout.asm")]
    assert "### references/chip8/breakout.asm\n\n```asm\n" in prompt.context
    assert "def assemble" in prompt.context and "LD V5, K" in prompt.context
    assert prompt.estimated_tokens() < 16_000  # ~11.5 k by the 4-characters estimate
    with pytest.raises(BadInput, match="missing.py is not a file"):
        reference_sources(chip8.model_copy(update={"sources": ("missing.py",)}))


def test_findings_show_large_arrays_only_where_they_differ() -> None:
    memory = [7] * 4096
    after_ref, after_port = list(memory), list(memory)
    after_ref[930], after_port[930] = 1, 2
    screen = [[0] * 64 for _ in range(32)]
    screen[3][5] = 1
    finding = Finding(
        level=1,
        check="step.mismatch",
        message="differs in memory",
        fields=["memory"],
        state_before={"memory": memory, "screen": screen, "V": [0] * 16},
        expected={"memory": after_ref},
        actual={"memory": after_port},
        error={"memory": 1.0},
    )
    view = prompts.finding_view(finding, [ROOT])
    assert view["expected"]["memory"] == "1 of 4096 elements differ: memory[930] = 1"
    assert view["actual"]["memory"] == "memory[930] = 2"
    before = view["state_before"]
    assert before["memory"] == "4096 elements, shown where the results differ: memory[930] = 7"
    assert before["screen"] == "2048 elements, all 0 except screen[3][5] = 1"
    assert before["V"] == [0] * 16  # small arrays whole


def test_run_verify_quotes_the_reference_lines_it_says_were_not_run() -> None:
    """The coverage note names a line and shows it: no read_file needed to see what it is."""
    source = ROOT / "references" / "pong" / "pong.c"
    lines = source.read_text().splitlines()
    bounce = next(i for i, line in enumerate(lines, 1) if "if (env->ball_y < 0.0f)" in line)
    counts = {bounce - 1: 5, bounce: 5, bounce + 1: 0, bounce + 3: 5}
    coverage = LineCoverage(str(source), "file", counts, branches={bounce: [5, 0]})
    report = Report(
        "pong", "pong.c", "port", [LevelResult(1, "pass", "ok", coverage=[coverage])], [1]
    )
    text = prompts.verify_result(report, [ROOT])
    assert f"a branch outcome never taken on line {bounce}" in text
    assert (
        f"pong.c line {bounce} (a branch outcome never taken): if (env->ball_y < 0.0f) {{" in text
    )
    assert f"pong.c line {bounce + 1} (never executed): {lines[bounce].strip()}" in text
    assert str(ROOT) not in text
    # a failing run stopped early: what it did not reach is no news (a played Pig run was shown
    # 30 "never executed" lines, reset included, beside a first-step finding)
    failing = Report(
        "pong", "pong.c", "port", [LevelResult(1, "fail", "x", coverage=[coverage])], [1]
    )
    assert "never" not in prompts.verify_result(failing, [ROOT])


def test_the_prompt_says_which_constructor_arguments_the_reference_is_made_with() -> None:
    """A played run ported Blackjack with gymnasium's default natural=False: the spec makes it
    with natural=true, and only a finding (a 1.5 reward) said so."""
    spec = spec_for_name("blackjack")
    prompt = prompts.translation_prompt(
        spec, "jax", "port/blackjack.py", "0-3", None, reference_sources(spec)
    )
    assert "constructor arguments (`natural=True, sab=False`)" in prompt.context + prompt.task


def test_a_virtualenv_inside_the_project_reads_as_one_outside_it(tmp_path: Path) -> None:
    """A finding's reference line in site-packages must read the same wherever the venv is,
    or a cassette recorded with the venv outside the checkout stops replaying inside one."""
    import sys

    line = f"{sys.prefix}/lib/python3.11/site-packages/gymnasium/envs/toy_text/blackjack.py:248"
    inside = prompts.scrub_paths(line, [Path(sys.prefix).parent])  # the project holds the venv
    outside = prompts.scrub_paths(line, [tmp_path])
    assert (
        inside
        == outside
        == "<python-env>/lib/python3.11/site-packages/gymnasium/envs/toy_text/blackjack.py:248"
    )
    finding = Finding(level=1, check="step.mismatch", message="m", reference_lines=[
        SourceLocation(line.rsplit(":", 1)[0], 248, "reward = -1.0")])  # fmt: skip
    assert prompts.finding_view(finding, [Path(sys.prefix).parent])["reference_lines"][0][
        "file"
    ].startswith("<python-env>/lib/")
