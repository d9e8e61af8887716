"""Usage for a played model's replies, counted the way Anthropic's Messages API reports it.

A played model (``agents/played.py``) has no tokenizer and no prompt cache, so its server
counts for it: tokens at ``CHARS_PER_TOKEN`` characters each (the estimate
``benchmarks/prompt_sizes.py`` uses), and the prompt cache followed through the request's
``cache_control`` breakpoints as the API documents it. The prompt is read in the API's order
(tools, system, messages), block by block; at each breakpoint the prefix up to it is cached
(when it is at least ``MIN_CACHED_TOKENS`` long). A request re-reads the longest prefix that
an earlier request cached (``cache_read_input_tokens``), writes the rest up to its last
breakpoint (``cache_creation_input_tokens``, split by TTL in ``cache_creation``) and pays the
tail after the last breakpoint as ``input_tokens``. Entries do not expire: a played model
answers far slower than a real one, and expiring its cache by the player's clock would bill
what a real model's run would not.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4
MIN_CACHED_TOKENS = 1024
"""The shortest prefix Anthropic caches for Sonnet and Opus models."""


def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Block:
    text: str
    """What the block holds, as the model reads it (JSON for tool definitions and calls)."""
    ttl: str | None = None
    """``5m`` or ``1h`` where the block carries a cache breakpoint."""


def prompt_blocks(body: dict[str, Any]) -> list[Block]:
    """A Messages API request body as blocks in the order the API caches them."""
    blocks: list[Block] = []
    for tool in body.get("tools") or []:
        blocks.append(Block(json.dumps(tool, sort_keys=True), _ttl(tool)))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(Block(system))
    for part in system if isinstance(system, list) else []:
        blocks.append(Block(str(part.get("text", "")), _ttl(part)))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            blocks.append(Block(f"{message.get('role')}:{content}"))
            continue
        for part in content or []:
            blocks.append(Block(f"{message.get('role')}:{block_text(part)}", _ttl(part)))
    return blocks


def block_text(part: dict[str, Any]) -> str:
    """The text of one content block: what it costs to read or write."""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "tool_use":
        return f"{part.get('name')} {json.dumps(part.get('input', {}), sort_keys=True)}"
    if kind == "tool_result":
        content = part.get("content", "")
        if isinstance(content, list):
            return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return str(content)
    return json.dumps(part, sort_keys=True)


def _ttl(part: dict[str, Any]) -> str | None:
    control = part.get("cache_control")
    if not isinstance(control, dict):
        return None
    return str(control.get("ttl", "5m"))


def output_tokens(content: list[dict[str, Any]]) -> int:
    return max(1, tokens(sum(len(block_text(part)) for part in content)))


@dataclass
class PromptCache:
    """The prefixes cached so far, by digest, and what each costs."""

    cached: set[str] = field(default_factory=set)

    def usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, Any]:
        """The ``usage`` object of a reply with ``content`` to ``body``, and the prefixes the
        request caches noted for the next."""
        blocks = prompt_blocks(body)
        running, digests, total = hashlib.sha256(), [], []
        count = 0
        for block in blocks:
            # the key is the content only: the breakpoints move on as the conversation grows
            running.update(json.dumps(block.text).encode() + b"\n")
            digests.append(running.copy().hexdigest())
            count += tokens(len(block.text))
            total.append(count)
        breakpoints = [
            i for i, b in enumerate(blocks) if b.ttl is not None and total[i] >= MIN_CACHED_TOKENS
        ]
        end = breakpoints[-1] if breakpoints else -1
        read_at = max((i for i in range(end + 1) if digests[i] in self.cached), default=-1)
        read = total[read_at] if read_at >= 0 else 0
        written = {"5m": 0, "1h": 0}
        start = read
        for i in breakpoints:
            if i > read_at:
                ttl = "1h" if blocks[i].ttl == "1h" else "5m"
                written[ttl] += total[i] - start
                start = total[i]
            self.cached.add(digests[i])
        prompt = total[-1] if total else 0
        return {
            "input_tokens": prompt - (total[end] if end >= 0 else 0),
            "output_tokens": output_tokens(content),
            "cache_creation_input_tokens": written["5m"] + written["1h"],
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }
