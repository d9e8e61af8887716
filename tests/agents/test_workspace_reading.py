"""What an agent needs to read is in its workspace, in its own language.

A reference that wraps a library game (UNO and Leduc wrap rlcard) names the library modules
holding the rules in env.toml's `library_modules`: the workspace carries a verbatim copy of each
under `reference/library/` and AGENTS.md lists it; a name that is not an installed module is one
line and exit 2. A JavaScript reference's reading notes speak the port's language (no `jnp` or
XLA advice in a Rust task). The field table has a pad column where the spec pads lists, and the
task says a batched field is `[n, *shape]`. A Rust task says the first build takes minutes.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from envforge.errors import BadInput
from envforge.prompts.sources import library_source
from envforge.spec import load_spec
from envforge.workspace.write import write_workspace


def test_a_library_game_is_copied_verbatim_and_listed(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "references" / "uno" / "env.toml")
    assert "rlcard.games.uno.round" in spec.library_modules
    write_workspace(spec, "rust", tmp_path / "ws")
    task = (tmp_path / "ws" / "AGENTS.md").read_text()
    found = importlib.util.find_spec("rlcard.games.uno.round")
    assert found is not None and found.origin is not None
    copy = tmp_path / "ws" / "reference" / "library" / "rlcard" / "games" / "uno" / "round.py"
    assert copy.read_text() == Path(found.origin).read_text()  # verbatim: lines cite alike
    assert "`reference/library/rlcard/games/uno/round.py`" in task
    assert "library code the reference runs" in task


def test_a_library_source_is_labelled_with_its_distribution() -> None:
    source = library_source("rlcard.games.uno.game")
    assert source.name.startswith("rlcard 1.2.0: rlcard/games/uno/game.py")
    assert source.library == "library/rlcard/games/uno/game.py"


def test_a_module_that_is_not_installed_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not_a_module_here.rules is not an installed Python module"):
        library_source("not_a_module_here.rules")
    spec_text = (ROOT / "references" / "leduc" / "env.toml").read_text()
    broken = spec_text.replace(
        '"rlcard.envs.leducholdem",', '"rlcard.envs.leducholdem",\n"no such",'
    )
    assert broken != spec_text
    folder = tmp_path / "leduc"
    folder.mkdir()
    (folder / "env.toml").write_text(broken)
    (folder / "leduc.py").write_text((ROOT / "references" / "leduc" / "leduc.py").read_text())
    done = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "prompt", "--spec", str(folder / "env.toml"),
         "--target", "jax", "--out", str(tmp_path / "ws")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "library_modules" in done.stderr


def test_javascript_notes_speak_the_ports_language(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "references" / "battle" / "env.toml")
    write_workspace(spec, "rust", tmp_path / "rust")
    write_workspace(spec, "jax", tmp_path / "jax")
    rust = (tmp_path / "rust" / "AGENTS.md").read_text()
    jax = (tmp_path / "jax" / "AGENTS.md").read_text()
    assert "Reading a JavaScript reference" in rust and "Reading a JavaScript reference" in jax
    assert "jnp" not in rust and "XLA" not in rust
    assert "wrapping" in rust
    assert "jnp.uint32" in jax
    assert "the first\nbuild compiles the dependencies" in rust


def test_the_field_table_shows_pads_and_batched_shapes(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "references" / "uno" / "env.toml")
    padded = [f for f in spec.state if f.pad is not None]
    assert padded
    write_workspace(spec, "jax", tmp_path / "ws")
    task = (tmp_path / "ws" / "AGENTS.md").read_text()
    header = next(line for line in task.splitlines() if line.startswith("| field |"))
    assert "| pad |" in header
    row = next(line for line in task.splitlines() if line.startswith(f"| {padded[0].name} |"))
    assert f"| {int(padded[0].pad or 0)} |" in row
    assert "`[n, *shape]`" in task


def test_translate_copies_library_code_beside_not_over_the_reference(tmp_path: Path) -> None:
    from envforge.prompts.sources import reference_sources
    from envforge.translate.workspace import RunWorkspace

    spec = load_spec(ROOT / "references" / "uno" / "env.toml")
    run = RunWorkspace(tmp_path / "run", spec, "jax")
    assert run.copy_reference(reference_sources(spec)) == "reference/"
    copied = tmp_path / "run" / "reference"
    # rlcard/envs/uno.py must not replace the reference's own uno.py
    assert (copied / "uno.py").read_text() == (ROOT / "references" / "uno" / "uno.py").read_text()
    assert (copied / "library" / "rlcard" / "envs" / "uno.py").is_file()


def test_a_rules_drafted_reference_is_copied_without_its_drafts(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "references" / "duel" / "env.toml")
    assert (spec.root / "drafts").is_dir()  # v2 and the rule questions live there
    write_workspace(spec, "rust", tmp_path / "ws")
    copied = tmp_path / "ws" / "reference"
    assert (copied / "duel.py").is_file() and (copied / "RULES.md").is_file()
    assert not (copied / "drafts").exists()


def test_a_gymnasium_reference_comes_with_its_helpers_and_its_init(tmp_path: Path) -> None:
    """Blackjack's class calls module functions (`draw_card`, `sum_hand`): the workspace holds
    them. FrozenLake's and Taxi's `__init__` (which build the transition tables) mention pygame
    beside the window settings: they are kept, only drawing methods are left out."""
    from envforge.prompts.sources import reference_sources

    blackjack = reference_sources(load_spec(ROOT / "references" / "blackjack" / "env.toml"))[0]
    assert "def draw_card(np_random):" in blackjack.text and "def sum_hand(hand)" in blackjack.text
    assert blackjack.text.index("def draw_card") < blackjack.text.index("class BlackjackEnv")
    lake = reference_sources(load_spec(ROOT / "references" / "frozenlake" / "env.toml"))[0]
    assert "def update_probability_matrix" in lake.text and "MAPS = {" in lake.text
    assert "# render(): drawing only, left out" in lake.text
    assert "# __init__()" not in lake.text
    write_workspace(load_spec(ROOT / "references" / "taxi" / "env.toml"), "c", tmp_path / "ws")
    taxi = next((tmp_path / "ws" / "reference").glob("*_gymnasium.py")).read_text()
    assert "def __init__(" in taxi and "# __init__()" not in taxi


def test_the_task_lists_the_verifiers_hook_and_the_rules_text(tmp_path: Path) -> None:
    """The states the verifier injects come from the spec's constrain hook, and a reference
    drafted from a rules text keeps it: both are named in AGENTS.md (the duel Rust agent found
    neither listed)."""
    write_workspace(load_spec(ROOT / "references" / "duel" / "env.toml"), "rust", tmp_path / "ws")
    task = (tmp_path / "ws" / "AGENTS.md").read_text()
    assert "`reference/duel_states.py`" in task and "[verify] constrain" in task
    assert "`reference/RULES.md`" in task and "rules text" in task
