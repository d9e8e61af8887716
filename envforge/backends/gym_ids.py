"""Gymnasium ids as users write them, and the one line that says what to try when one is unknown.

``gymnasium:<id>`` finds every id gymnasium knows: its own and those of installed packages that
register through the ``gymnasium.envs`` entry-point group (gymnasium 1.x no longer loads that
group itself, so :func:`load_entry_points` does, once, before an id is looked up). ``gymnasium:<module>:<id>`` imports the module first (gymnasium's own form), for a
package that registers its ids on import and ships no entry point (minigrid). An unknown id is
one line naming the installed package whose name matches the id's prefix, in the form to try.
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from typing import Any

from envforge.errors import BadInput


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@lru_cache(maxsize=1)
def _installed_modules() -> tuple[str, ...]:
    """Top-level modules of the installed distributions (read from their metadata, none imported)."""
    from importlib.metadata import packages_distributions

    return tuple(sorted(m for m in packages_distributions() if m.isidentifier()))


def modules_for(env_id: str) -> list[str]:
    """Installed top-level modules whose name matches the id's prefix (``MiniGrid-Empty-8x8``:
    ``minigrid``; ``highway-fast``: ``highway_env``)."""
    prefix = _plain(re.split(r"[-/]", env_id, maxsplit=1)[0])
    if len(prefix) < 3:
        return []
    found = []
    for module in _installed_modules():
        plain = _plain(module)
        if plain and (plain == prefix or plain.startswith(prefix) or prefix.startswith(plain)):
            found.append(module)
    # the closest names first: an exact match, then the shortest
    return sorted(found, key=lambda m: (_plain(m) != prefix, len(m)))[:3]


def unknown_id_line(env_id: str, reason: str = "") -> str:
    """What to try for an id gymnasium does not know, in one line."""
    bare = env_id.rsplit(":", 1)[-1]
    said = f"gymnasium:{env_id}: no env registered under {bare!r}"
    if reason:
        said += f" ({reason})"
    modules = modules_for(bare)
    if ":" in env_id:
        module = env_id.rsplit(":", 1)[0]
        return f"{said} after importing {module}; check the id's spelling and version"
    if modules:
        tries = " or ".join(f"gymnasium:{m}:{bare}" for m in modules)
        return (
            f"{said} by gymnasium or an installed package's entry point; {modules[0]} is "
            f"installed and may register it when imported: try {tries}"
        )
    return (
        f"{said} by gymnasium or an installed package's entry point; install the package "
        f"that provides it, or, if it registers its ids on import, name it: "
        f"gymnasium:<module>:{bare}"
    )


ENTRY_POINT_GROUP = "gymnasium.envs"


@lru_cache(maxsize=1)
def load_entry_points() -> tuple[str, ...]:
    """Run each installed package's ``gymnasium.envs`` entry point (a function that registers
    its ids, or a module that does on import), as gymnasium 0.26-0.29 did; ``__root__`` registers
    without a namespace, any other name under it. Returns the entry points that failed (a
    broken plugin must not hide the others)."""
    from importlib.metadata import entry_points

    from gymnasium.envs import registration

    failed = []
    before = registration.current_namespace
    for plugin in entry_points(group=ENTRY_POINT_GROUP):
        registration.current_namespace = None if plugin.name == "__root__" else plugin.name
        try:
            loaded = plugin.load()
            if callable(loaded):
                loaded()
        except Exception as e:  # a plugin's own error: reported, the others still load
            failed.append(f"{plugin.value} ({type(e).__name__}: {e})")
        finally:
            registration.current_namespace = before
    return tuple(failed)


def import_registering_module(env_id: str) -> None:
    """Import ``module`` of a ``module:id`` reference (gymnasium registers its ids then)."""
    if ":" not in env_id:
        return
    module = env_id.rsplit(":", 1)[0]
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise BadInput(f"gymnasium:{env_id}: cannot import {module} ({e})") from None


def check_id(env_id: str) -> None:
    """Raise BadInput with :func:`unknown_id_line` when gymnasium cannot find ``env_id``."""
    import gymnasium

    broken = load_entry_points()
    import_registering_module(env_id)
    try:
        gymnasium.spec(env_id.rsplit(":", 1)[-1])
    except gymnasium.error.Error as e:
        said = str(e).splitlines()[0] if ":" in env_id else ""
        if broken:
            said += ("; " if said else "") + "entry points that failed: " + ", ".join(broken)
        raise BadInput(unknown_id_line(env_id, said)) from None


def make_env(env_id: str, options: dict[str, Any]) -> Any:
    """``gymnasium.make`` of an id of either form, every error one line."""
    import gymnasium

    check_id(env_id)
    try:
        return gymnasium.make(env_id.rsplit(":", 1)[-1], disable_env_checker=True, **options)
    except TypeError as e:
        raise BadInput(f"gymnasium env {env_id!r} rejects the spec's [options]: {e}") from None
    except gymnasium.error.Error as e:
        raise BadInput(f"cannot make gymnasium env {env_id!r}: {e}") from None
