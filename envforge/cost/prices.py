"""Model prices: the versioned table in prices.toml, user-supplied rates, exact call costs."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from envforge.agents.messages import Usage
from envforge.errors import BadInput
from envforge.spec import bounds
from envforge.untrusted.input_files import InputFileError, load_toml

DEFAULT_TABLE = Path(__file__).with_name("prices.toml")
PER_MILLION = Decimal(1_000_000)
RATE_KEYS = ("input", "output", "cache_read", "cache_write")
BATCH_KEYS = ("batch_input", "batch_output")
OPTIONAL_KEYS = (*BATCH_KEYS, "cache_write_1h")


class UnknownPrice(BadInput):
    """No price for this model: the user must supply one (--price-in/--price-out)."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    batch_input: Decimal | None = None
    batch_output: Decimal | None = None
    cache_write_1h: Decimal | None = None
    """Writes to a 1-hour prompt cache (Anthropic); None: billed at ``cache_write``."""
    version: str = "user"
    """The price table version these rates come from, or ``user`` for rates given on the CLI."""

    def cost(self, usage: Usage, batch: bool = False) -> Decimal:
        """Exact cost of one call in USD."""
        rate_in, rate_out = self.input, self.output
        if batch:
            if self.batch_input is None or self.batch_output is None:
                raise UnknownPrice("no batch rates for this model")
            rate_in, rate_out = self.batch_input, self.batch_output
        micro = (
            usage.input_tokens * rate_in
            + usage.output_tokens * rate_out
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_write_1h_tokens * self.long_cache_write
        )
        return micro / PER_MILLION

    @property
    def long_cache_write(self) -> Decimal:
        return self.cache_write if self.cache_write_1h is None else self.cache_write_1h

    def worst_case(self, input_tokens: int, max_output_tokens: int) -> Decimal:
        """The most a call can cost: every input token at the dearest input/cache-write rate."""
        rate_in = max(self.input, self.cache_write, self.long_cache_write)
        return (input_tokens * rate_in + max_output_tokens * self.output) / PER_MILLION


def _decimal(value: Any, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadInput(f"{where}: expected a number of USD per million tokens, got {value!r}")
    try:
        rate = Decimal(str(value))
    except InvalidOperation:
        raise BadInput(
            f"{where}: expected a number of USD per million tokens, got {value!r}"
        ) from None
    return bounds.check(where, rate, bounds.USD_PER_MTOK)


@dataclass(frozen=True)
class PriceTable:
    version: str
    prices: dict[str, Price]
    aliases: dict[str, str]

    def price_for(self, model: str) -> Price:
        name = self.aliases.get(model, model)
        if name in self.prices:
            return self.prices[name]
        raise UnknownPrice(
            f"no price for model {model!r} in price table {self.version}; "
            "pass --price-in and --price-out (USD per million tokens)"
        )

    def names(self) -> list[str]:
        return sorted(self.prices)


def load_price_table(path: str | Path | None = None) -> PriceTable:
    p = Path(path) if path is not None else DEFAULT_TABLE
    try:
        raw = load_toml(p, "price table")
    except InputFileError as e:
        if e.reason == "not found":
            raise BadInput(f"price table not found: {p}") from None
        raise
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{p}: not valid TOML ({e})") from None
    version = str(raw.get("version", ""))
    if not version:
        raise BadInput(f"{p}: key 'version' is required")
    prices: dict[str, Price] = {}
    aliases: dict[str, str] = {}
    for name, entry in raw.get("models", {}).items():
        where = f"{p}: models.{name}"
        missing = [k for k in RATE_KEYS if k not in entry]
        if missing:
            raise BadInput(f"{where}: missing {', '.join(missing)}")
        rate = {k: _decimal(entry[k], f"{where}.{k}") for k in RATE_KEYS}
        extra = {k: _decimal(entry[k], f"{where}.{k}") for k in OPTIONAL_KEYS if k in entry}
        prices[name] = Price(
            input=rate["input"],
            output=rate["output"],
            cache_read=rate["cache_read"],
            cache_write=rate["cache_write"],
            batch_input=extra.get("batch_input"),
            batch_output=extra.get("batch_output"),
            cache_write_1h=extra.get("cache_write_1h"),
            version=version,
        )
        for alias in entry.get("aliases", []):
            aliases[str(alias)] = name
    return PriceTable(version=version, prices=prices, aliases=aliases)


def user_price(
    price_in: float | str,
    price_out: float | str,
    cache_read: float | str | None = None,
    cache_write: float | str | None = None,
) -> Price:
    """Rates given on the command line; cache reads/writes default to the input rate."""
    rate_in = _decimal(price_in, "--price-in")
    return Price(
        input=rate_in,
        output=_decimal(price_out, "--price-out"),
        cache_read=rate_in if cache_read is None else _decimal(cache_read, "--price-cache-read"),
        cache_write=rate_in
        if cache_write is None
        else _decimal(cache_write, "--price-cache-write"),
    )


def price_from_options(
    price_in: float | None,
    price_out: float | None,
    cache_read: float | None = None,
    cache_write: float | None = None,
) -> Price | None:
    """Rates from command-line options: None when none are given, an error when half are."""
    if price_in is None and price_out is None:
        if cache_read is not None or cache_write is not None:
            raise BadInput("cache prices need --price-in and --price-out too")
        return None
    if price_in is None or price_out is None:
        raise BadInput("give both --price-in and --price-out, or neither")
    return user_price(price_in, price_out, cache_read, cache_write)
