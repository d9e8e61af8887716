"""The retry policy and error kinds every live provider shares (the ``Model`` interface itself
is in ``envforge/agents/messages.py``).

A provider adapter subclasses :class:`ProviderModel`: it sends one request through its SDK
(with the SDK's own retries turned off) and sorts the SDK's errors into the kinds below. This
module then retries transient ones with exponential backoff and turns the rest into typed errors.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from envforge.agents.messages import ModelRequest, ModelResponse
from envforge.errors import BadInput, EnvforgeError

log = logging.getLogger("envforge.agents")


class ModelError(EnvforgeError):
    """The provider failed and retrying did not help (or cannot help)."""


class ContextOverflow(ModelError):
    """The request is longer than the model's context window: the episode ends, the run goes on."""


class ModelAuthError(BadInput):
    """Missing or rejected API key."""


class UnknownModel(BadInput):
    """The provider does not know this model (or the name selects no provider)."""


class ErrorKind(Enum):
    TRANSIENT = "transient"
    """429, 5xx, connection and timeout errors: retry with backoff, ``attempts`` tries."""
    OVERLOADED = "overloaded"
    """The provider is overloaded (Anthropic 529, 503 UNAVAILABLE): retry for ``overload_wait_s``."""
    CONTEXT = "context"
    """The prompt does not fit the context window: retrying the same request cannot help."""
    AUTH = "auth"
    UNKNOWN_MODEL = "unknown_model"
    FATAL = "fatal"


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    """Tries in all, the first included."""
    initial_delay_s: float = 2.0
    max_delay_s: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.25
    """Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]."""
    overload_wait_s: float = 300.0
    """An overloaded provider is retried (same backoff) until the waits add up to this: overload
    spells last minutes, and giving up after a minute would end a run that could go on."""

    def delay(self, retry_index: int, retry_after_s: float | None = None) -> float:
        if retry_after_s is not None:
            return min(self.max_delay_s, max(0.0, retry_after_s))
        base = min(self.max_delay_s, self.initial_delay_s * self.multiplier**retry_index)
        return base * (1 + random.uniform(-self.jitter, self.jitter))


@dataclass(frozen=True)
class ClassifiedError:
    kind: ErrorKind
    message: str
    """One line, no credentials."""
    retry_after_s: float | None = None


class ProviderModel:
    """Base of the live adapters: retries, backoff and error translation around ``_send``."""

    provider = "provider"
    key_hint = "the provider's API key variable"

    def __init__(
        self,
        name: str,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.name = name
        self.retry = retry or RetryPolicy()
        self._sleep = sleep or time.sleep
        self.timeout_s = timeout_s
        """Seconds one HTTP request may take (the adapter hands it to its SDK client)."""
        self.retry_wait_s = 0.0
        """Seconds slept between retries so far, over every call (reported apart from the
        time the run spent working)."""

    def _send(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    def _classify(self, error: Exception) -> ClassifiedError | None:
        """Sort an SDK exception; None for exceptions that are not the provider's."""
        raise NotImplementedError

    def complete(self, request: ModelRequest) -> ModelResponse:
        attempt, waited = 0, 0.0
        while True:
            try:
                return self._send(request)
            except Exception as error:
                classified = self._classify(error)
                if classified is None:
                    raise
                info = classified
            self._raise_unretryable(info)
            attempt += 1
            if (
                info.kind is ErrorKind.OVERLOADED
            ):  # may go past ``attempts``: it is the wait that counts
                if waited >= self.retry.overload_wait_s:
                    break
            elif attempt >= self.retry.attempts:
                break
            delay = self.retry.delay(min(attempt - 1, 30), info.retry_after_s)
            log.warning(
                "%s %s: %s; retrying in %.1fs", self.provider, self.name, info.message, delay
            )
            self._sleep(delay)
            waited += delay
            self.retry_wait_s += delay
        raise ModelError(
            f"{self.provider} {self.name}: gave up after {self._tries(attempt, waited, info)}: "
            f"{info.message}"
        )

    def _tries(self, attempt: int, waited: float, info: ClassifiedError) -> str:
        if info.kind is ErrorKind.OVERLOADED:
            return f"{waited:.0f}s of waiting for an overloaded provider"
        return f"{attempt} attempts"

    def _raise_unretryable(self, info: ClassifiedError) -> None:
        if info.kind is ErrorKind.CONTEXT:
            raise ContextOverflow(f"{self.provider} {self.name}: {info.message}")
        if info.kind is ErrorKind.AUTH:
            raise ModelAuthError(
                f"{self.provider} rejected the credentials for {self.name}: {info.message} "
                f"(check {self.key_hint})"
            )
        if info.kind is ErrorKind.UNKNOWN_MODEL:
            raise UnknownModel(f"{self.provider} does not know model {self.name!r}: {info.message}")
        if info.kind is ErrorKind.FATAL:
            raise ModelError(f"{self.provider} {self.name}: {info.message}")


def retry_wait_s(model: object) -> float:
    """Seconds the provider model under ``model`` (through wrappers' ``inner``) slept on
    retries; 0 for offline models."""
    for _ in range(8):  # a meter around a recorder around the provider, at most
        if isinstance(model, ProviderModel):
            return model.retry_wait_s
        model = getattr(model, "inner", None)
        if model is None:
            break
    return 0.0


CONTEXT_OVERFLOW_PHRASES = (
    "prompt is too long",  # Anthropic
    "context length",  # OpenAI, vLLM: "maximum context length is ..."
    "context_length_exceeded",
    "exceeds the maximum number of tokens",  # Gemini
    "context window",
    "too many tokens",
)


def is_context_overflow(status: int, text: str) -> bool:
    """A 400/413 whose message says the prompt does not fit (each provider words it its own way)."""
    lowered = text.lower()
    return status in (400, 413) and any(p in lowered for p in CONTEXT_OVERFLOW_PHRASES)


def status_kind(status: int, text: str = "") -> ErrorKind:
    """The usual HTTP meaning of a status code, shared by the adapters."""
    if is_context_overflow(status, text):
        return ErrorKind.CONTEXT
    if status in (529, 503):
        return ErrorKind.OVERLOADED
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 404 or (status == 400 and "model" in text.lower() and "not" in text.lower()):
        return ErrorKind.UNKNOWN_MODEL
    if status in (408, 409, 425, 429, 529) or status >= 500:
        return ErrorKind.TRANSIENT
    return ErrorKind.FATAL


def status_error(
    status: int, text: str, headers: object, kind: ErrorKind | None = None
) -> ClassifiedError:
    """An HTTP error from a provider: ``kind`` where the adapter knows better than the status
    (``status_kind``), the status and message, and the server's ``retry-after``."""
    return ClassifiedError(
        kind or status_kind(status, text), f"HTTP {status}: {text}", retry_after(headers)
    )


def retry_after(headers: object) -> float | None:
    """Seconds from a ``retry-after`` header (numeric form only)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    value = get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


def redact(text: str) -> str:
    """Blank out any configured key that a provider echoed back in an error message."""
    for variable in CREDENTIAL_VARIABLES:
        secret = os.environ.get(variable, "")
        if len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
    return text


def one_line(text: object, limit: int = 300) -> str:
    """An error message as one short line, without credentials."""
    line = redact(" ".join(str(text).split()))
    return line if len(line) <= limit else line[: limit - 3] + "..."
