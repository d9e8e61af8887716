"""Anthropic Messages API adapter (``anthropic`` SDK): tool use and prompt caching.

Credentials and endpoint come from the SDK's usual variables (ANTHROPIC_API_KEY or
ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL). Cache breakpoints go on the system prompt and the end
of the stable prefix (the part marked ``cache``: reference source, spec, contract), both in the
1-hour cache, and on the newest message (5 minutes), so every agent step re-reads the
conversation so far from the cache. Usage reports 1-hour writes apart (``cache_write_1h``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envforge.agents.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
    arguments_or_invalid,
)
from envforge.agents.model import (
    ClassifiedError,
    ErrorKind,
    ModelAuthError,
    ProviderModel,
    RetryPolicy,
    one_line,
    status_error,
    status_kind,
)

EPHEMERAL = {"type": "ephemeral"}
"""The 5-minute cache: the conversation so far, re-read by the next step of the episode."""
LONG_LIVED = {"type": "ephemeral", "ttl": "1h"}
"""The 1-hour cache: the stable prefix (system prompt, reference context), which every episode
of a run starts from; a long verify between two episodes would outlast 5 minutes. The API wants
1-hour breakpoints before 5-minute ones, which this order (system, first message, newest) is."""


def _block(part: TextPart | ToolCall | ToolResult) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
    return {
        "type": "tool_result",
        "tool_use_id": part.call_id,
        "content": part.content,
        "is_error": part.is_error,
    }


def _message(message: Message, cache_last: bool) -> dict[str, Any]:
    # the API wants tool results before any text in a user turn
    parts = sorted(message.parts, key=lambda p: not isinstance(p, ToolResult))
    blocks = []
    for part in parts:
        block = _block(part)
        if isinstance(part, TextPart) and part.cache:
            block["cache_control"] = LONG_LIVED
        blocks.append(block)
    if cache_last and blocks and "cache_control" not in blocks[-1]:
        blocks[-1]["cache_control"] = EPHEMERAL
    return {"role": message.role, "content": blocks}


def wire_request(model: str, request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments of ``messages.create`` for this request."""
    last = len(request.messages) - 1
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": [_message(m, cache_last=i == last) for i, m in enumerate(request.messages)],
    }
    if request.system:  # the API refuses empty text blocks
        kwargs["system"] = [{"type": "text", "text": request.system, "cache_control": LONG_LIVED}]
    if request.tools:
        kwargs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    return kwargs


def parse_response(message: Any) -> ModelResponse:
    texts, calls = [], []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, arguments_or_invalid(block.input)))
    u = message.usage
    written = u.cache_creation_input_tokens or 0
    long_lived = 0
    if u.cache_creation is not None:  # the breakdown by TTL, where the API sends it
        long_lived = u.cache_creation.ephemeral_1h_input_tokens or 0
        written = u.cache_creation.ephemeral_5m_input_tokens or 0
    usage = Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_input_tokens or 0,
        cache_write_tokens=written,
        cache_write_1h_tokens=long_lived,
    )
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=usage,
        model=message.model,
        stop_reason=message.stop_reason or "",
    )


class AnthropicModel(ProviderModel):
    provider = "Anthropic"
    key_hint = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        name: str,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        super().__init__(name, retry, sleep, timeout_s)
        import anthropic

        self._sdk = anthropic
        try:
            self._client = anthropic.Anthropic(max_retries=0, timeout=timeout_s)
        except anthropic.AnthropicError as e:  # e.g. a broken credentials profile on disk
            raise ModelAuthError(f"Anthropic credentials: {one_line(e)}") from None
        if (
            self._client.api_key is None
            and self._client.auth_token is None
            and (self._client.credentials is None)
        ):
            raise ModelAuthError("no Anthropic API key: set ANTHROPIC_API_KEY")

    def _send(self, request: ModelRequest) -> ModelResponse:
        message = self._client.messages.create(**wire_request(self.name, request))
        return parse_response(message)

    def _classify(self, error: Exception) -> ClassifiedError | None:
        sdk = self._sdk
        if isinstance(error, sdk.APIStatusError):
            text = one_line(getattr(error, "api_message", None) or error.message)
            kind = status_kind(error.status_code, text)
            if getattr(error, "type", None) == "not_found_error" or (
                error.status_code == 400 and "model" in text.lower() and "invalid" in text.lower()
            ):
                kind = ErrorKind.UNKNOWN_MODEL
            if getattr(error, "type", None) == "overloaded_error":
                kind = ErrorKind.OVERLOADED
            return status_error(error.status_code, text, error.response.headers, kind)
        if isinstance(error, sdk.CredentialsError):
            return ClassifiedError(ErrorKind.AUTH, one_line(error))
        if isinstance(error, sdk.APIConnectionError):
            return ClassifiedError(ErrorKind.TRANSIENT, one_line(error.message))
        return None
