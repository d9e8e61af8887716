"""The port kit: the one package a shipped or generated port may import from envforge.

A port is the env's own code; what it takes from envforge is only this::

    from envforge.kit import Draws                  # draws under [rng] step (envforge/rng/jax_draws.py)
    from envforge.kit import speed_layer            # XLA:CPU tricks, switchable (envforge/kit/speed_layer.py)
    from envforge.kit import use_xla_linalg_on_cpu  # Cholesky without LAPACK's thread pool (xla_cpu.py)
    from envforge.kit import cache_root             # where a port may keep compiled executables
    from envforge.kit import TurnBased, TurnBasedRules  # several agents taking turns (kit/seats.py)

and the contract it implements (:mod:`envforge.kit.contract`: a ``Protocol`` per target, which
the drivers check and the translation prompts quote). The modules themselves stay where the
rest of envforge uses them; the kit names them once, so a port never reaches into envforge's
internals and ``tests/house/test_architecture.py`` can hold every port in ``generated/`` to it.

The names load on first use: ``envforge.kit.contract`` is read by prompts and drivers that
must not pay for importing jax.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.cache import cache_root
    from envforge.kit import speed_layer
    from envforge.kit.seats import SeatFields, TurnBased, TurnBasedRules
    from envforge.kit.xla_cpu import use_xla_linalg_on_cpu
    from envforge.rng.jax_draws import Draws

EXPORTS: dict[str, tuple[str, str | None]] = {
    "Draws": ("envforge.rng.jax_draws", "Draws"),
    "speed_layer": ("envforge.kit.speed_layer", None),
    "use_xla_linalg_on_cpu": ("envforge.kit.xla_cpu", "use_xla_linalg_on_cpu"),
    "cache_root": ("envforge.cache", "cache_root"),
    "TurnBased": ("envforge.kit.seats", "TurnBased"),
    "TurnBasedRules": ("envforge.kit.seats", "TurnBasedRules"),
    "SeatFields": ("envforge.kit.seats", "SeatFields"),
}
"""What the kit offers a port: name -> (module, attribute; None: the module itself)."""

__all__ = [
    "Draws",
    "SeatFields",
    "TurnBased",
    "TurnBasedRules",
    "cache_root",
    "speed_layer",
    "use_xla_linalg_on_cpu",
]


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = EXPORTS[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
