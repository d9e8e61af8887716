"""Typed errors. Inside the package they are exceptions; at the CLI they become one line + exit 2."""

from __future__ import annotations

from decimal import Decimal


class EnvforgeError(Exception):
    """Base class for every error envforge raises on purpose."""


class BadInput(EnvforgeError):
    """The user gave us something we cannot work with (missing file, unknown env, bad flag)."""


class PortNotFound(BadInput):
    """A port path the user named does not exist: the one message for it, whichever command
    (and whichever layer: the resolver, a driver recipe) finds it missing."""

    def __init__(self, port: object) -> None:
        self.port = str(port)
        super().__init__(f"port not found: {port} (no such file or folder)")


class BrokenReference(BadInput):
    """The reference cannot be built or run as the spec describes it. Nothing can be said about
    a port compared with it: verify's outcome is "reference error" (exit code 2), never a
    verdict about the port."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"reference error: {problem}")


class SpecError(BadInput):
    """An env.toml is malformed. The message names the file, the key and what was expected."""

    def __init__(self, path: object, key: str, expected: str, got: object = None) -> None:
        self.path = str(path)
        self.key = key
        self.expected = expected
        self.got = got
        got_part = "" if got is None else f"; got {got!r}"
        super().__init__(f"{self.path}: key '{key}': expected {expected}{got_part}")


class DriverFailure(EnvforgeError):
    """An implementation failed while being driven (raised, crashed, hung, broke the contract)."""

    check = "exception"

    def __init__(self, side: str, call: str, message: str, detail: str = "") -> None:
        self.side = side
        self.call = call
        self.message = message
        """Without the ``side call:`` prefix of ``str(self)``."""
        self.detail = detail
        self.state_before: dict | None = None
        """Filled by a level that knows which state the failing call was given."""
        self.actions: list = []
        self.seed: int | None = None
        """Filled by a level that knows which episode failed (its reset seed and step)."""
        self.step: int | None = None
        super().__init__(f"{side} {call}: {message}")


class DriverRaised(DriverFailure):
    check = "exception"


class DriverCrashed(DriverFailure):
    check = "crash"


class DriverTimeout(DriverFailure):
    check = "timeout"


class ContractViolation(DriverFailure):
    check = "contract"


class BudgetExceeded(EnvforgeError):
    """The next call could push spending past the budget, so it was not made."""

    def __init__(self, limit: Decimal, spent: Decimal, worst_case: Decimal) -> None:
        self.limit = limit
        self.spent = spent
        self.worst_case = worst_case
        super().__init__(
            f"budget ${limit} would be exceeded: spent ${spent:.6f}, "
            f"next call could cost up to ${worst_case:.6f}"
        )
