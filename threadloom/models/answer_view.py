"""What the ``messages`` stream shows of a JSON-schema tool-prompting reply.

In ``tool_calling="json_schema"`` mode the model writes JSON: ``{"final_answer": "..."}``
or ``{"name": <tool>, "arguments": {...}}``. Streaming those raw characters would show a
user braces and keys. ``FinalAnswerView`` turns the stream of raw chunks into the chunks a
user should see: the final answer's text, decoded as it arrives, and nothing of a tool
call (the agent's ``tools`` step shows that). The assembled reply is unchanged: only what
is emitted to the engine goes through the view.
"""

from __future__ import annotations

import re
from typing import Any

_OPEN = re.compile(r'\s*\{\s*"final_answer"\s*:\s*"')
_TARGET = '{"final_answer":"'
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}


class FinalAnswerView:
    """A per-reply filter: raw JSON chunk in, the chunk a user should see out (or None)."""

    def __init__(self) -> None:
        self.state = "head"  # head -> answer -> done, or head -> hidden
        self.head = ""
        self.pending = ""

    def __call__(self, chunk: Any) -> Any:
        """Map one raw chunk; None when it shows nothing and carries no usage."""
        text = chunk.content if isinstance(chunk.content, str) else ""
        shown = self.feed(text)
        if not shown and not getattr(chunk, "usage_metadata", None):
            return None
        return chunk.model_copy(update={"content": shown})

    def feed(self, text: str) -> str:
        """The visible text that ``text`` (the next raw characters) adds."""
        if self.state == "head":
            self.head += text
            match = _OPEN.match(self.head)
            if match is None:
                compact = re.sub(r"\s+", "", self.head)
                if not _TARGET.startswith(compact):
                    self.state = "hidden"  # a tool call (or not JSON): show nothing
                return ""
            self.state = "answer"
            text, self.head = self.head[match.end():], ""
        if self.state != "answer":
            return ""
        return self._decode(self.pending + text)

    def _decode(self, raw: str) -> str:
        self.pending = ""
        out: list[str] = []
        i = 0
        while i < len(raw):
            char = raw[i]
            if char == '"':
                self.state = "done"
                break
            if char != "\\":
                out.append(char)
                i += 1
                continue
            if i + 1 >= len(raw) or (raw[i + 1] == "u" and i + 6 > len(raw)):
                self.pending = raw[i:]  # an escape split across chunks
                break
            code = raw[i + 1]
            if code == "u":
                try:
                    out.append(chr(int(raw[i + 2:i + 6], 16)))
                except ValueError:
                    out.append(raw[i:i + 6])
                i += 6
            else:
                out.append(_ESCAPES.get(code, code))
                i += 2
        return "".join(out)
