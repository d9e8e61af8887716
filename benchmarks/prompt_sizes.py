"""How big is the translation prompt, and what does sending it cost per model at list prices?

    .venv/bin/python benchmarks/prompt_sizes.py [env ...]      (default: pong cartpole)

The prompt is what the first model call of `envforge translate --target jax` sends: system
prompt, stable prefix (reference source, spec, JAX contract, rules), task, and the six tool
schemas. Tokens are estimated at 4 characters per token (no tokenizer is installed; code often
tokenizes denser, so real counts can be 10-25% higher). Costs use envforge/cost/prices.toml:

    send        the prompt once at the input rate (no caching)
    cache write the first send with the stable prefix written to the prompt cache
    cache read  every later call in the run re-reads the prefix from the cache
    + port out  one send plus writing a port as long as the shipped hand-written one
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

from envforge.cost.prices import load_price_table
from envforge.prompts.render import estimate_tokens, tool_specs, translation_prompt
from envforge.spec import spec_for_name

ROOT = Path(__file__).resolve().parents[1]
MILLION = Decimal(1_000_000)


def prompt_tokens(env: str) -> tuple[int, int, int]:
    """(whole prompt, cacheable prefix, hand-written port) in estimated tokens."""
    spec = spec_for_name(env)
    prompt = translation_prompt(spec, "jax", f"port/{env}.py", "0-3", "reference/")
    tools = json.dumps([[t.name, t.description, t.parameters] for t in tool_specs()])
    whole = estimate_tokens(prompt.system + prompt.context + prompt.task + tools)
    prefix = estimate_tokens(prompt.system + prompt.context + tools)
    port = ROOT / "generated" / env / "jax" / f"{env}.py"
    return whole, prefix, estimate_tokens(port.read_text()) if port.is_file() else 0


def main(envs: list[str]) -> None:
    table = load_price_table()
    for env in envs:
        whole, prefix, port = prompt_tokens(env)
        print(f"\n{env}: translation prompt ~{whole:,} tokens "
              f"(cacheable prefix ~{prefix:,}; hand-written JAX port ~{port:,} tokens)")  # fmt: skip
        print(f"  {'model':<24}{'send':>10}{'cache write':>13}{'cache read':>12}{'+ port out':>12}")
        for name in table.names():
            p = table.price_for(name)
            rest = whole - prefix
            send = whole * p.input / MILLION
            write = (prefix * p.cache_write + rest * p.input) / MILLION
            read = (prefix * p.cache_read + rest * p.input) / MILLION
            with_port = send + port * p.output / MILLION
            print(f"  {name:<24}{send:>10.4f}{write:>13.4f}{read:>12.4f}{with_port:>12.4f}")
    print(f"\nUSD, price table {table.version}; tokens = characters / 4.")


if __name__ == "__main__":
    main(sys.argv[1:] or ["pong", "cartpole"])
