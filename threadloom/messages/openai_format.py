"""Messages with their content in OpenAI's chat format (``add_messages(format=
"langchain-openai")``, as LangGraph formats them through LangChain).

Content becomes a string or a list of ``text`` / ``image_url`` parts: Anthropic-style
``image`` parts (a ``source`` of ``base64`` data or a ``url``) become ``image_url`` parts
(a ``data:`` URL for base64), extra keys of a text part (``cache_control``) are dropped, an
assistant's ``tool_use`` parts become its ``tool_calls``, and a user message's
``tool_result`` parts become ``ToolMessage``s, in front of what is left of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.messages.spellings import ToolCallView
from threadloom.messages.types import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["openai_formatted"]


def _image_url(block: dict[str, Any]) -> dict[str, Any] | None:
    source = block.get("source")
    if isinstance(source, dict):
        kind, mime, data = source.get("type"), source.get("media_type"), source.get("data")
        url = source.get("url")
    else:  # LangChain's standard block: source_type / mime_type / data / url
        kind, mime, data = block.get("source_type"), block.get("mime_type"), block.get("data")
        url = block.get("url")
    if kind == "base64" and data is not None:
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    if kind == "url" and url:
        return {"type": "image_url", "image_url": {"url": url}}
    return None


def _part(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "image":
        return _image_url(block) or block
    if kind == "image_url":
        return {"type": "image_url", "image_url": block["image_url"]}
    return block  # type: ignore[no-any-return]


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [_part(block) for block in content]


def _one(message: BaseMessage) -> list[BaseMessage]:
    content = message.content
    if isinstance(content, str):
        return [message]
    if isinstance(message, AIMessage):
        known = {c.get("id") for c in message.tool_calls}
        calls = list(message.tool_calls) + [
            ToolCallView(name=b["name"], args=b.get("input") or {}, id=b["id"], type="tool_call")
            for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
            and b.get("id") not in known]
        kept = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
        return [message.model_copy(update={"content": _content(kept) if kept else "",
                                           "tool_calls": calls})]
    if isinstance(message, HumanMessage):
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            out: list[BaseMessage] = [ToolMessage(
                content=_content(b.get("content", "")), tool_call_id=b.get("tool_use_id", ""),
                status="error" if b.get("is_error") else "success",
                id=f"{message.id}-{i}" if message.id else None) for i, b in enumerate(results)]
            rest = [b for b in content if b not in results]
            if rest:
                out.append(message.model_copy(update={"content": _content(rest)}))
            return out
    return [message.model_copy(update={"content": _content(content)})]


def openai_formatted(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with OpenAI-format content (see the module docstring); a message
    already in that format is kept as it is (the same object)."""
    out: list[BaseMessage] = []
    for message in messages:
        out.extend(_one(message))
    return out
