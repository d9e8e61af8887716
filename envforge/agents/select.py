"""The one model selector: the name picks the provider (``claude-…``, ``gemini-…``,
``openai:…``) or an offline model (``replay:<cassette.jsonl>``, ``scripted:<script.json>``).

``envforge translate``, ``envforge init`` and ``envforge batch`` all open models here; a batch
manifest passes its folder as ``root``, so its cassette and script paths are relative to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envforge.agents.messages import Model
from envforge.agents.model import RetryPolicy, UnknownModel

PROVIDER_PREFIXES = ("claude-", "gemini-", "openai:", "replay:", "scripted:")


@dataclass(frozen=True)
class ModelOptions:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 600.0
    """Seconds one HTTP request may take."""
    record_to: Path | None = None
    """Append every call of a live model to this cassette."""


def provider_of(name: str) -> str:
    for prefix in PROVIDER_PREFIXES:
        if name.startswith(prefix):
            return prefix.rstrip("-:")
    raise UnknownModel(
        f"unknown model {name!r}: names start with claude-, gemini-, openai:, replay: or "
        "scripted: (e.g. claude-sonnet-4-6, gemini-2.5-pro, openai:gpt-5, replay:run.jsonl, "
        "scripted:answers.json)"
    )


def open_model(name: str, options: ModelOptions | None = None, root: Path | None = None) -> Model:
    """The adapter for ``name``, wrapped in a recorder when asked. Paths of offline models are
    relative to ``root`` when given (a manifest's folder). Raises BadInput subclasses."""
    options = options or ModelOptions()
    provider = provider_of(name)
    model: Model
    if provider == "replay":
        from envforge.agents.cassette import ReplayModel

        return ReplayModel(_relative(name.removeprefix("replay:"), root))
    if provider == "scripted":
        from envforge.agents.script_file import ScriptFileModel

        return ScriptFileModel(_relative(name.removeprefix("scripted:"), root))
    if provider == "claude":
        from envforge.agents.anthropic_model import AnthropicModel

        model = AnthropicModel(name, options.retry, timeout_s=options.timeout_s)
    elif provider == "gemini":
        from envforge.agents.gemini_model import GeminiModel

        model = GeminiModel(name, options.retry, timeout_s=options.timeout_s)
    else:
        from envforge.agents.openai_model import OpenAICompatibleModel

        if not name.removeprefix("openai:"):
            raise UnknownModel("openai: needs a model name, e.g. openai:gpt-5")
        model = OpenAICompatibleModel(name, options.retry, timeout_s=options.timeout_s)
    if options.record_to is not None:
        from envforge.agents.cassette import RecordingModel

        model = RecordingModel(model, options.record_to)
    return model


def skip_calls(model: Model, count: int) -> None:
    """A resumed job's first ``count`` calls were answered from its call log: offline models
    that answer by position move past them too (live providers need nothing)."""
    from envforge.agents.cassette import ReplayModel
    from envforge.agents.script_file import ScriptFileModel

    if count and isinstance(model, ScriptFileModel | ReplayModel):
        model.position += count


def _relative(path: str, root: Path | None) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() or root is None else root / candidate
