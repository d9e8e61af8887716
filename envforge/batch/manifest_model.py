"""The model a manifest's ``model`` key names: every provider ``envforge translate`` knows
(``agents/select.py``), plus ``scripted:<file.json>`` (``agents/script_file.py``); script and
cassette paths are relative to the manifest."""

from __future__ import annotations

from pathlib import Path

from envforge.agents.cassette import ReplayModel
from envforge.agents.script_file import ScriptFileModel
from envforge.agents.select import ModelOptions, open_model
from envforge.messages import Model

SCRIPTED = "scripted:"


def open_batch_model(name: str, root: Path, options: ModelOptions | None = None) -> Model:
    """The model for a manifest's ``model`` key; script and cassette paths are relative to
    ``root`` (the manifest's folder)."""
    if name.startswith(SCRIPTED):
        return ScriptFileModel(_relative(name.removeprefix(SCRIPTED), root))
    if name.startswith("replay:"):
        return ReplayModel(_relative(name.removeprefix("replay:"), root))
    return open_model(name, options)


def skip_calls(model: Model, count: int) -> None:
    """A resumed job's first ``count`` calls were answered from its call log: offline models
    that answer by position move past them too (live providers need nothing)."""
    if count and isinstance(model, ScriptFileModel | ReplayModel):
        model.position += count


def _relative(path: str, root: Path) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else root / candidate
