"""Tool-call arguments cut off by the output token limit: how to tell, and what the
model is told (H14)."""

from __future__ import annotations

from typing import Any

_EXCERPT = 300


def looks_truncated(raw: Any) -> bool:
    """Whether ``raw`` reads as the start of a JSON value that was cut off.

    True when the text ends inside a string or with brackets still open, e.g.
    ``'{"path": "a.txt", "content": "hel'``; False for complete or otherwise broken JSON.
    """
    if not isinstance(raw, str) or not raw.strip():
        return False
    depth, in_string, escaped = 0, False, False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


def excerpt(raw: Any) -> str:
    """``raw`` as text, cut to 300 characters for an error message."""
    text = raw if isinstance(raw, str) else repr(raw)
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "..."


def truncated_text(name: str, raw: Any) -> str:
    """What the model is told about its cut-off call to ``name``."""
    seen = f" (received only: {excerpt(raw)})" if isinstance(raw, str) and raw else ""
    return (
        f"Error: the call to {name!r} was truncated: the reply hit the output token limit "
        f"before the call was complete{seen}, so no call from that reply was run. "
        "Send the call again in full."
    )
