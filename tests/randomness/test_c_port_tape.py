"""C ports take in-step randomness through the draw hook (``native/c_draws.py``).

``generated/blackjack/c/blackjack.h`` deals every card inside ``step`` through
``blackjack_draw``: under verification the hook hands it the reference's recorded draws and
logs what it asked, with the port's line; under ``envforge.make`` (and the bench's C loop)
each env draws from its own generator seeded at reset. Broken ports are exact patches of the
shipped header (``conftest.apply_patch``), verified in this process at a small scale.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from blackjack_play import (
    assert_choice_of_12_finding,
    assert_outcomes_like_the_reference,
    port_outcomes,
)
from conftest import ROOT, apply_patch

import envforge
from envforge.backends.c_port import port_source, port_spec
from envforge.backends.c_port_batch import c_batch
from envforge.bench.c_loop import build_harness
from envforge.bench.measure import BenchSettings
from envforge.prompts.render import translation_prompt
from envforge.spec import spec_for_name
from envforge.untrusted.port_files import list_port
from envforge.verify.context import VerifyOptions
from envforge.verify.findings import Finding
from envforge.verify.runner import verify
from envforge.workspace.next_prompt import listed_file

PORT = ROOT / "generated" / "blackjack" / "c"
HEADER = PORT / "blackjack.h"
QUICK = VerifyOptions(scale=0.1, isolate=False, sandbox=None)


def _l1_finding(port: Path):  # type: ignore[no-untyped-def]
    level = verify(spec_for_name("blackjack"), port.parent, [1], QUICK).levels[0]
    assert level.status == "fail"
    return level.findings[0]


def test_a_c_port_drawing_one_extra_number_is_an_rng_tape_finding(tmp_path: Path) -> None:
    broken = apply_patch(
        HEADER,
        tmp_path,
        (
            "        int32_t card = DRAW_CARD(draws);\n"
            "        if (n < HAND_SLOTS) env->player[n] = card;\n",
            "        int32_t card = DRAW_CARD(draws);\n"
            "        (void)blackjack_draw(draws, 3, 0, 4);\n"
            "        if (n < HAND_SLOTS) env->player[n] = card;\n",
        ),
    )
    finding = _l1_finding(broken.path)
    assert (finding.check, finding.extra["draw"]) == (
        "rng.tape",
        {
            "index": 1,
            "reference": "no draw #1 (drew 1 in all)",
            "port": "integers[0, 4)",
            "reference_count": 1,
            "port_count": 2,
        },
    )
    assert "the reference asked no draw #1 (drew 1 in all), the port asked integers[0, 4)" in (
        finding.message
    )
    # the port's line that asked, read from the header the port was built from
    assert Path(finding.port_lines[0].file).name == "blackjack.h"
    assert finding.port_lines[0].line in broken.lines
    assert "blackjack_draw(draws, 3, 0, 4)" in finding.port_lines[0].text


def test_a_c_port_taking_a_draw_of_the_wrong_range_is_an_rng_tape_finding(
    tmp_path: Path,
) -> None:
    broken = apply_patch(
        HEADER,
        tmp_path,
        (
            "blackjack_draw((draws), DRAW_CHOICE, 13, 0)",
            "blackjack_draw((draws), DRAW_CHOICE, 12, 0)",
        ),
    )
    # the site of a draw made by a macro is the line of step that used it
    assert_choice_of_12_finding(_l1_finding(broken.path), "blackjack.h", "DRAW_CARD(draws)")


@pytest.mark.slow  # L0-L3 through the hook: about a minute on a loaded 2-core machine
def test_the_blackjack_c_port_is_equivalent_through_the_hook_at_l0_to_l3() -> None:
    report = verify(spec_for_name("blackjack"), PORT, [0, 1, 2, 3], QUICK)
    assert report.passed, [f.message for f in report.findings]
    assert "reference draws replayed and accounted for" in report.levels[1].summary


def test_make_deals_from_each_envs_own_generator_as_the_reference_does() -> None:
    """``envforge.make(..., target="c")`` steps through the hook with a generator per env,
    seeded at reset: the same seed plays the same hands, and the outcomes of ``stick_at_17``
    (lose, push, win, natural win) have the reference's frequencies."""
    obs, port = port_outcomes(envforge.make("blackjack", target="c", num_envs=1000), seed=1)
    again = port_outcomes(envforge.make("blackjack", target="c", num_envs=1000), seed=1)
    assert np.array_equal(obs, again[0]) and np.array_equal(port, again[1])
    _, other = port_outcomes(envforge.make("blackjack", target="c", num_envs=1000), seed=2)
    assert len(other) != len(port) or not np.array_equal(other, port)
    assert_outcomes_like_the_reference(port)


def test_the_batch_draws_from_a_generator_per_env_not_per_state() -> None:
    """Envs in the same state taking the same action still draw their own cards (the
    verifier's plain step would seed by state and action and deal them all the same one); a
    reset with the same seeds restarts the generators."""
    batch = c_batch(spec_for_name("blackjack"), PORT, 512, strict_float=False)

    def hit_from_one_state() -> np.ndarray:
        batch.reset(np.arange(512, dtype=np.uint32), None)
        batch.envs[:] = batch.envs[0]
        batch.step(np.ones(512, np.int32))
        return np.array(batch.envs["player"][:, 2])

    cards = hit_from_one_state()
    assert set(np.unique(cards)) == set(range(1, 11))
    assert np.array_equal(cards, hit_from_one_state())


def test_the_bench_loop_steps_the_c_port_with_each_envs_own_generator() -> None:
    spec = spec_for_name("blackjack")
    source = port_source(PORT, spec.name)
    exe, _ = build_harness(port_spec(spec, source), source, BenchSettings())
    assert "envforge_draws_seed(&draws[i], (uint64_t)i)" in exe.with_suffix(".c").read_text()
    proc = subprocess.run([str(exe), "16", "1", "0.01", "0"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[0]) >= 16
    assert float(proc.stderr.split()[-1]) != 0.0  # hands ended (the sum of their rewards)


def test_the_c_prompt_teaches_the_draw_hook_only_where_step_draws() -> None:
    context = translation_prompt(spec_for_name("blackjack"), "c", "port/blackjack.h").context
    assert "## Randomness inside `step`" in context
    assert "#ifndef blackjack_draw" in context and "void* draws" in context
    assert "rng.tape" in context and "jax.random" not in context
    cartpole = translation_prompt(spec_for_name("cartpole"), "c", "port/cartpole.h").context
    assert "_draw" not in cartpole and "void* draws" not in cartpole


def test_a_repair_prompt_shows_the_c_header_when_the_finding_names_no_line(tmp_path: Path) -> None:
    """A C port that does not build (an L0 finding with no port line) gets its header listed
    in the next repair prompt, not "There is no port yet"."""
    (tmp_path / "blackjack.h").write_text(HEADER.read_text())
    finding = Finding(level=0, check="error", message="struct Blackjack: unsupported declarator")
    listed = listed_file(finding, spec_for_name("blackjack"), list_port(tmp_path))
    assert listed is not None and listed.name == "blackjack.h"
