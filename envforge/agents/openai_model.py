"""OpenAI-compatible chat completions adapter (``openai`` SDK): OpenAI, vLLM, llama.cpp server.

``--model openai:<name>`` sends ``<name>`` to OPENAI_BASE_URL (default api.openai.com) with
OPENAI_API_KEY. Local servers usually need no key; when a base URL is set and no key is, a
placeholder key is sent. OpenAI caches long prompt prefixes by itself; cached tokens come back
in ``prompt_tokens_details.cached_tokens`` and are priced at the cache-read rate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from envforge.agents.messages import (
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
    ModelError,
    ProviderModel,
    RetryPolicy,
    one_line,
    status_error,
    status_kind,
)

PREFIX = "openai:"
LOCAL_PLACEHOLDER_KEY = "not-needed"


def _is_openai_host(base_url: str | None) -> bool:
    return not base_url or "api.openai.com" in base_url


def wire_request(model: str, request: ModelRequest, official: bool) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create``."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}]
    for m in request.messages:
        if m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            messages.append(entry)
            continue
        for part in m.parts:
            if isinstance(part, ToolResult):
                content = f"ERROR: {part.content}" if part.is_error else part.content
                messages.append({"role": "tool", "tool_call_id": part.call_id, "content": content})
        text = "\n\n".join(p.text for p in m.parts if isinstance(p, TextPart))
        if text:
            messages.append({"role": "user", "content": text})
    kwargs: dict[str, Any] = {"model": model, "messages": messages}
    # OpenAI's reasoning models reject max_tokens; local servers know only max_tokens
    kwargs["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
    if request.tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    return kwargs


def parse_response(completion: Any) -> ModelResponse:
    choice = completion.choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(c.id, c.function.name, arguments_or_invalid(c.function.arguments or "{}"))
        for c in (message.tool_calls or [])
        if getattr(c, "function", None) is not None
    )
    u = completion.usage
    cached = 0
    if u is not None and u.prompt_tokens_details is not None:
        cached = u.prompt_tokens_details.cached_tokens or 0
    usage = Usage(
        input_tokens=(u.prompt_tokens - cached) if u is not None else 0,
        output_tokens=u.completion_tokens if u is not None else 0,
        cache_read_tokens=cached,
    )
    return ModelResponse(
        text=message.content or "",
        tool_calls=calls,
        usage=usage,
        model=completion.model or "",
        stop_reason=choice.finish_reason or "",
    )


class OpenAICompatibleModel(ProviderModel):
    provider = "OpenAI-compatible endpoint"
    key_hint = "OPENAI_API_KEY and OPENAI_BASE_URL"

    def __init__(
        self,
        name: str,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        super().__init__(name, retry, sleep, timeout_s)
        import openai

        self._sdk = openai
        self.remote_name = name.removeprefix(PREFIX)
        base_url = os.environ.get("OPENAI_BASE_URL")
        self._official = _is_openai_host(base_url)
        key = os.environ.get("OPENAI_API_KEY")
        if not key and not self._official:
            key = LOCAL_PLACEHOLDER_KEY
        try:
            self._client = openai.OpenAI(api_key=key, max_retries=0, timeout=timeout_s)
        except openai.OpenAIError:
            raise ModelAuthError("no OpenAI API key: set OPENAI_API_KEY") from None

    def _send(self, request: ModelRequest) -> ModelResponse:
        completion = self._client.chat.completions.create(
            **wire_request(self.remote_name, request, self._official)
        )
        if not completion.choices:
            raise ModelError(f"{self.provider} {self.name}: the response has no choices")
        return parse_response(completion)

    def _classify(self, error: Exception) -> ClassifiedError | None:
        sdk = self._sdk
        if isinstance(error, sdk.APIStatusError):
            text = one_line(error.message)
            kind = status_kind(error.status_code, text)
            code = getattr(error, "code", None)
            if code == "model_not_found":
                kind = ErrorKind.UNKNOWN_MODEL
            if code == "context_length_exceeded":
                kind = ErrorKind.CONTEXT
            return status_error(error.status_code, text, error.response.headers, kind)
        if isinstance(error, sdk.APIConnectionError):
            return ClassifiedError(ErrorKind.TRANSIENT, one_line(error.message))
        if isinstance(error, sdk.APIError):
            return ClassifiedError(ErrorKind.FATAL, one_line(error.message))
        return None
