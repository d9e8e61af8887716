"""The model name picks the provider: ``claude-…``, ``gemini-…``, ``openai:…``, ``replay:…``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envforge.agents.model import RetryPolicy, UnknownModel
from envforge.messages import Model

PROVIDER_PREFIXES = ("claude-", "gemini-", "openai:", "replay:")


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
        f"unknown model {name!r}: names start with claude-, gemini-, openai: or replay: "
        "(e.g. claude-sonnet-4-6, gemini-2.5-pro, openai:gpt-5, replay:run.jsonl)"
    )


def open_model(name: str, options: ModelOptions | None = None) -> Model:
    """The adapter for ``name``, wrapped in a recorder when asked. Raises BadInput subclasses."""
    options = options or ModelOptions()
    provider = provider_of(name)
    model: Model
    if provider == "replay":
        from envforge.agents.cassette import load_replay

        return load_replay(name)
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
