"""Blackjack played by ``stick_at_17`` on a port's vector env and on gymnasium's reference, for
the tests that check a port's own generator deals as the reference does (Rust and C ports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from scipy.stats import chi2_contingency

OUTCOMES = [-1.0, 0.0, 1.0, 1.5]  # lose, push, win, natural win


def port_outcomes(env: Any, seed: int, steps: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """The first observations and the reward of every hand that ended in ``steps`` steps."""
    obs, _ = env.reset(seed=seed)
    first, ended = obs.copy(), []
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(np.where(obs[:, 0] >= 17, 0, 1))
        ended.append(reward[terminated | truncated])
    return first, np.concatenate(ended)


def reference_outcomes(hands: int = 8000) -> np.ndarray:
    reference = gym.make("Blackjack-v1", natural=True, sab=False)
    out: list[float] = []
    reference.reset(seed=0)
    for _ in range(hands):
        hand, _ = reference.reset()
        done = False
        while not done:
            hand, r, term, trunc, _ = reference.step(0 if hand[0] >= 17 else 1)
            done = term or trunc
        out.append(float(r))
    return np.asarray(out)


def assert_outcomes_like_the_reference(port: np.ndarray) -> None:
    """Chi-square on the table of outcomes, port against reference (p > 0.001)."""
    ref = reference_outcomes()
    table = [[int(np.sum(side == o)) for o in OUTCOMES] for side in (port, ref)]
    assert sum(table[0]) > 10_000
    assert chi2_contingency(table).pvalue > 1e-3, table


def assert_choice_of_12_finding(finding: Any, port_file: str, draws_card: str) -> None:
    """A port dealing ``choice(12)`` instead of 13: an ``rng.tape`` finding at draw #0 whose
    port line is the one in ``port_file`` that dealt the card (``draws_card`` in its text)."""
    assert finding.check == "rng.tape"
    assert "draw #0" in finding.message
    assert "the reference asked choice of 13, the port asked choice of 12" in finding.message
    assert finding.extra["draw"]["port"] == "choice of 12"
    assert Path(finding.port_lines[0].file).name == port_file
    assert draws_card in finding.port_lines[0].text
