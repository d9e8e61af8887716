"""The target registry (envforge/targets): what "jax", "rust" and "c" mean, said in one place
and read by every command, `envforge list` and `envforge bench`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envforge.backends.recipe import port_recipe
from envforge.bench.suite import find_ports
from envforge.cli import app
from envforge.errors import BadInput
from envforge.prompts.render import translation_context
from envforge.resolve import default_port
from envforge.spec import spec_for_name
from envforge.targets import all_targets, get_target, target_names, target_of_port
from envforge.translate.workspace import port_layout

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_names_each_target_once_with_all_its_parts() -> None:
    assert target_names()[:3] == ("jax", "rust", "c")
    for target in all_targets():
        assert (ROOT / "envforge" / "prompts" / target.prompt_template).is_file()
        for part in ("driver", "preflight", "bench_job", "make_batch"):
            assert getattr(target, part) is not None, (target.name, part)
            assert callable(target.load_code(part)), (target.name, part)
    with pytest.raises(BadInput, match="unsupported target 'cobol'.*jax, rust, c"):
        get_target("cobol")


@pytest.mark.parametrize(
    ("port", "target"),
    [
        ("generated/cartpole/jax", "jax"),
        ("generated/cartpole/jax/cartpole.py", "jax"),
        ("generated/cartpole/rust", "rust"),
        ("generated/cartpole/c", "c"),
        ("generated/cartpole/c/cartpole.h", "c"),
        ("generated/halfcheetah/brax", "jax"),  # a folder not named after its target
    ],
)
def test_a_port_is_recognised_by_its_files(port: str, target: str) -> None:
    assert target_of_port(ROOT / port).name == target
    recipe = port_recipe(spec_for_name(port.split("/")[1]), ROOT / port, strict_float=True)
    assert recipe.kind == target
    assert recipe.env == get_target(target).strict_env  # jax: XLA's strict flags, else none


def test_a_folder_of_no_known_port_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a port")
    with pytest.raises(BadInput, match="cannot tell the port's target"):
        target_of_port(tmp_path)
    with pytest.raises(BadInput, match="unsupported target"):
        default_port(spec_for_name("cartpole"), "cobol")


def test_list_and_bench_find_every_port_folder_brax_included() -> None:
    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    cheetah = rows["halfcheetah"]
    assert cheetah["ports"] == ["jax", "brax"]
    assert cheetah["targets"] == {"jax": "jax", "brax": "jax"}
    assert cheetah["made_by"]["brax"] == "third-party"
    assert rows["cartpole"]["ports"] == ["jax", "rust", "c"]
    spec = spec_for_name("halfcheetah")
    assert [label for label, _ in find_ports(spec, None)] == ["jax", "brax"]
    assert find_ports(spec, ["brax"]) == [("brax", ROOT / "generated/halfcheetah/brax")]
    assert find_ports(spec_for_name("cartpole"), ["c", "jax"])[0][0] == "c"


def test_prompts_and_workspaces_come_from_the_target() -> None:
    spec = spec_for_name("cartpole")
    assert port_layout(spec, "rust").main_file == "port/src/lib.rs"
    assert port_layout(spec, "c").port_rel == "port/cartpole.h"
    text = translation_context(spec, "c", "port/cartpole.h")
    assert "## The target: a C port" in text and "void cartpole_reset(" in text
    assert "## The target: a Rust port" in translation_context(spec, "rust", "port")


def test_a_batch_manifest_takes_every_registered_target_and_refuses_others(
    tmp_path: Path,
) -> None:
    from envforge.batch.manifest import load_manifest

    def manifest(target: str) -> Path:
        path = tmp_path / f"{target}.toml"
        path.write_text(
            '[batch]\nname = "t"\ntotal_budget_usd = 1\n\n[[job]]\nname = "one"\n'
            f'ref = "{ROOT / "references" / "cartpole" / "env.toml"}"\n'
            f'model = "scripted:none.json"\ntarget = "{target}"\n'
        )
        return path

    for name in target_names():
        assert [job.target for job in load_manifest(manifest(name)).jobs] == [name]
    with pytest.raises(BadInput) as error:
        load_manifest(manifest("go"))
    assert "unknown target 'go'" in str(error.value) and "\n" not in str(error.value)
