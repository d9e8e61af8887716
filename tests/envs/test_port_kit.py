"""The port kit (envforge/kit, docs/PORT_KIT.md): what a port may import from envforge, and the
port contract as typed code that the drivers check and the prompts quote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Protocol

import pytest

from envforge.errors import ContractViolation
from envforge.kit import contract
from envforge.spec import spec_for_name

ROOT = Path(__file__).resolve().parents[2]
PONG = ROOT / "generated" / "pong" / "jax" / "pong.py"


def test_the_kit_offers_envforges_own_modules_and_loads_them_only_when_asked() -> None:
    from envforge import cache
    from envforge.kit import Draws, cache_root, speed_layer, use_xla_linalg_on_cpu, xla_cpu
    from envforge.kit import speed_layer as kit_speed_layer
    from envforge.rng import jax_draws

    assert kit_speed_layer is speed_layer and Draws is jax_draws.Draws
    assert use_xla_linalg_on_cpu is xla_cpu.use_xla_linalg_on_cpu
    assert cache_root is cache.cache_root
    # prompts and drivers read the contract without paying for jax
    code = "import sys, envforge.kit.contract; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    with pytest.raises(ImportError):
        exec("from envforge.kit import settle_flags")  # only what the kit names


def test_the_jax_driver_checks_a_port_against_the_protocol_and_says_what_to_define(
    tmp_path: Path,
) -> None:
    from envforge.backends.jax import JaxDriver

    port = tmp_path / "pong.py"
    port.write_text(PONG.read_text().replace("def observe(", "def observe_fast("))
    with pytest.raises(ContractViolation) as caught:
        JaxDriver(spec_for_name("pong"), port)
    message = str(caught.value)
    assert "pong.py lacks ['observe']" in message and "JaxPort" in message
    assert "observe(state: EnvState) -> Obs" in message  # the signature to write, not a name only


def test_what_a_driver_requires_is_what_the_protocol_declares() -> None:
    class Extended(contract.JaxPort, Protocol):
        def render(self, state: object) -> None:
            """a frame"""

    assert contract.members(contract.JaxPort) == (
        "reset",
        "step",
        "observe",
        "to_canonical",
        "from_canonical",
    )
    assert contract.members(Extended)[-1] == "render"

    class Module:  # a port as the driver sees it: names with functions
        reset = step = observe = to_canonical = from_canonical = staticmethod(lambda *a: a)

    assert contract.missing(Module, contract.JaxPort) == []
    assert contract.missing(Module, Extended) == ["render"]
    assert contract.signatures(Extended, ("render",)) == [
        "render(state: object) -> None  # a frame"
    ]

    class Batch:  # a PyO3 class: methods callable, num_envs a getter (present, not callable)
        reset = step = observe = get_state = set_state = staticmethod(lambda *a: a)
        num_envs = property(lambda self: 0)

    assert contract.missing(Batch, contract.RustEnvBatch) == []
    del Batch.get_state
    assert contract.missing(Batch, contract.RustEnvBatch) == ["get_state"]


def test_the_translation_prompts_quote_the_protocols() -> None:
    from envforge.prompts import render as prompts

    jax_text = prompts.translation_prompt(spec_for_name("taxi"), "jax", "port/taxi.py").context
    for line in [*contract.signatures(contract.JaxPortWithDraws)]:
        assert f"    {line}\n" in jax_text, line
    assert "from envforge.kit import Draws" in jax_text
    rust_text = prompts.translation_prompt(spec_for_name("pong"), "rust", "port").context
    for line in contract.signatures(contract.RustEnvBatch, annotated=False):
        assert f"    {line}\n" in rust_text, line
    assert "reset_where(done, seeds) -> None  # optional" in rust_text
