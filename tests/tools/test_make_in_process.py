"""``envforge.make`` runs the port in the caller's process: ``help(envforge.make)`` said nothing
of it (it showed the lazy stub), and no warning was issued."""

from __future__ import annotations

import pydoc
import warnings

import pytest

import envforge


def test_help_says_the_port_runs_in_process() -> None:
    text = " ".join(pydoc.render_doc(envforge.make, renderer=pydoc.plaintext).split())
    assert "The port runs in this process, not in a sandbox" in text
    assert "envforge.InProcessPortWarning" in text and "filterwarnings" in text


def test_make_warns_and_the_warning_can_be_silenced() -> None:
    with pytest.warns(envforge.InProcessPortWarning, match="outside any sandbox") as said:
        env = envforge.make("cartpole", target="c", num_envs=2)
    env.close()
    assert said[0].filename == __file__  # it points at the caller's line
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=envforge.InProcessPortWarning)
        envforge.make("cartpole", target="c", num_envs=2).close()
    assert not [w for w in seen if issubclass(w.category, envforge.InProcessPortWarning)]
