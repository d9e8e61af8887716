"""Text a port, a reference or an agent wrote, made safe to show a person: data, never markup
or terminal control.

Everything such a side says reaches reports as strings (an exception's message, a source
line, a build log, a model's reply). Printed as it is, ``[/]`` breaks rich's markup parser,
``:100:`` becomes an emoji, ``ESC[2J`` clears the screen, an OSC sequence retitles the window
or plants a link, and a newline followed by ``verdict: equivalent`` prints a verdict envforge
never gave. Every report shows such text through these helpers:

- :func:`visible` shows each control character as its escape (``\\x1b``, ``\\r``), keeping
  newlines and tabs;
- :func:`one_line` shows newlines too (a table cell, a one-line summary);
- :func:`indented` keeps the lines but starts every line after the first with an indent, so no
  line the side wrote begins where envforge's own lines (the verdict) do;
- :func:`shown` is a rich ``Text`` of the visible text (no markup, no emoji, no highlighting),
  for table cells and ``console.print`` (``Text.assemble`` styles envforge's own words beside it).
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

SHOWN_CATEGORIES = ("Cc", "Zl", "Zp")
"""C0 and C1 controls (ESC, BEL, CR, NUL, the OSC introducer ...) and the Unicode line and
paragraph separators: each moves the cursor, talks to the terminal or splits a line."""
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""Direction marks, embeddings, overrides and isolates: they reorder what a line appears to say."""
KEPT = frozenset("\n\t")
INDENT = "    "


def _escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return {"\r": "\\r", "\n": "\\n", "\t": "\\t"}.get(char, f"\\x{code:02x}")
    return f"\\u{code:04x}"


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in SHOWN_CATEGORIES or char in BIDI_CONTROLS


def visible(text: object, keep: frozenset[str] = KEPT) -> str:
    """``text`` (any object: its ``str``) with every control character but those in ``keep``
    written as its escape: ``"\\x1b[2J"`` shows as the six characters ``\\x1b[2J``."""
    raw = str(text)
    if not any(_hidden(char) for char in raw):
        return raw
    return "".join(
        _escape_char(char) if _hidden(char) and char not in keep else char for char in raw
    )


def one_line(text: object) -> str:
    """``text`` visible and on one line: newlines and tabs shown as ``\\n`` and ``\\t`` too."""
    return visible(text, keep=frozenset())


def indented(text: object, indent: str = INDENT) -> str:
    """``text`` visible, every line after the first starting with ``indent``: what a port
    wrote can never begin a line of the report."""
    return visible(text).replace("\n", "\n" + indent)


def shown(text: object, style: str = "") -> Text:
    """``text`` visible as a rich ``Text``: rich parses no markup and no emoji in it."""
    return Text(visible(text), style=style)
