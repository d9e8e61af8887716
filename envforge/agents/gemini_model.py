"""Google Gemini adapter (``google-genai`` SDK) with manual function calling.

Automatic function calling is disabled: the SDK would run the tools itself and report only the
last round's usage, and every round has to be priced and budgeted here. Credentials come from
GEMINI_API_KEY or GOOGLE_API_KEY; GOOGLE_GEMINI_BASE_URL points the SDK at another endpoint.
Thought signatures on function calls are kept and sent back, as the API requires.
"""

from __future__ import annotations

import base64
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
    ProviderModel,
    RetryPolicy,
    one_line,
    status_error,
    status_kind,
)

BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"
LOCAL_ID_PREFIX = "local-"
"""Ids we invent for calls the API sent without one; they are not sent back."""


def _api_id(call_id: str) -> str | None:
    return None if call_id.startswith(LOCAL_ID_PREFIX) else call_id


def _call_part(types: Any, call: ToolCall) -> Any:
    signature = base64.b64decode(call.signature) if call.signature else None
    return types.Part(
        function_call=types.FunctionCall(id=_api_id(call.id), name=call.name, args=call.arguments),
        thought_signature=signature,
    )


def _result_part(types: Any, result: ToolResult) -> Any:
    key = "error" if result.is_error else "output"
    return types.Part(
        function_response=types.FunctionResponse(
            id=_api_id(result.call_id), name=result.name, response={key: result.content}
        )
    )


def wire_contents(types: Any, request: ModelRequest) -> list[Any]:
    contents = []
    for m in request.messages:
        parts = []
        for p in m.parts:
            if isinstance(p, TextPart):
                parts.append(types.Part(text=p.text))
            elif isinstance(p, ToolCall):
                parts.append(_call_part(types, p))
            else:
                parts.append(_result_part(types, p))
        contents.append(
            types.Content(role="model" if m.role == "assistant" else "user", parts=parts)
        )
    return contents


def wire_config(types: Any, request: ModelRequest) -> Any:
    tools = None
    if request.tools:
        declarations = [
            types.FunctionDeclaration(
                name=t.name, description=t.description, parameters_json_schema=t.parameters
            )
            for t in request.tools
        ]
        tools = [types.Tool(function_declarations=declarations)]
    return types.GenerateContentConfig(
        system_instruction=request.system,
        tools=tools,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        max_output_tokens=request.max_tokens,
        temperature=request.temperature,
    )


def parse_response(response: Any) -> ModelResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    stop_reason = ""
    if response.candidates:
        candidate = response.candidates[0]
        reason = candidate.finish_reason
        stop_reason = str(getattr(reason, "value", reason) or "")
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.function_call is not None:
                fc = part.function_call
                signature = (
                    base64.b64encode(part.thought_signature).decode()
                    if part.thought_signature
                    else None
                )
                call_id = fc.id or f"{LOCAL_ID_PREFIX}{len(calls)}-{fc.name}"
                calls.append(
                    ToolCall(call_id, fc.name or "", arguments_or_invalid(fc.args), signature)
                )
            elif part.text and not part.thought:
                texts.append(part.text)
    meta = response.usage_metadata
    cached = (meta.cached_content_token_count or 0) if meta else 0
    prompt = (
        ((meta.prompt_token_count or 0) + (meta.tool_use_prompt_token_count or 0)) if meta else 0
    )
    output = ((meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)) if meta else 0
    usage = Usage(input_tokens=prompt - cached, output_tokens=output, cache_read_tokens=cached)
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=usage,
        model=response.model_version or "",
        stop_reason=stop_reason,
    )


class GeminiModel(ProviderModel):
    provider = "Gemini"
    key_hint = "GEMINI_API_KEY or GOOGLE_API_KEY"

    def __init__(
        self,
        name: str,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        super().__init__(name, retry, sleep, timeout_s)
        import httpx2
        from google import genai
        from google.genai import errors, types

        self._types = types
        self._errors = errors
        self._transport_error = httpx2.TransportError
        options = types.HttpOptions(
            base_url=os.environ.get(BASE_URL_VARIABLE) or None,
            timeout=int(timeout_s * 1000),
            retry_options=None,  # retries are ours (see ProviderModel)
        )
        try:
            self._client = genai.Client(http_options=options)
        except ValueError:
            raise ModelAuthError(
                "no Gemini API key: set GEMINI_API_KEY or GOOGLE_API_KEY"
            ) from None

    def _send(self, request: ModelRequest) -> ModelResponse:
        response = self._client.models.generate_content(
            model=self.name,
            contents=wire_contents(self._types, request),
            config=wire_config(self._types, request),
        )
        return parse_response(response)

    def _classify(self, error: Exception) -> ClassifiedError | None:
        if isinstance(error, self._errors.APIError):
            text = one_line(error.message or error.status or "")
            kind = status_kind(error.code, text)
            if error.code == 400 and (error.status == "INVALID_ARGUMENT") and "API key" in text:
                kind = ErrorKind.AUTH
            if error.code == 503 or error.status == "UNAVAILABLE":
                kind = ErrorKind.OVERLOADED
            elif error.status == "RESOURCE_EXHAUSTED":
                kind = ErrorKind.TRANSIENT
            return status_error(error.code, text, getattr(error.response, "headers", None), kind)
        if isinstance(error, self._transport_error):
            return ClassifiedError(ErrorKind.TRANSIENT, one_line(error))
        return None
