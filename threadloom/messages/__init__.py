"""Message types, coercion and the OpenAI chat-completions wire format.

The classes mirror LangChain's message vocabulary (``HumanMessage``, ``AIMessage``,
``ToolMessage``, ...) as small pydantic v2 models, so a user's habits carry over. Every
message dumps to a flat JSON-able dict with a ``type`` key (``message_to_dict``) that
``message_from_dict`` reads back losslessly; ``AnyMessage`` is the discriminated union.

This package only re-exports; the code lives in:

- ``records``: the ``ToolCall``/``InvalidToolCall``/``ToolCallChunk`` dicts and tool-call
  argument parsing (``parse_tool_args``, ``make_tool_call``);
- ``types``: the message classes, ``UsageMetadata`` and chunk arithmetic
  (``construct_unchecked``, ``add_usage``);
- ``coerce``: message-likes -> messages, and ``message_to_dict``/``message_from_dict``;
- ``wire``: the OpenAI request/response message format;
- ``spellings``: Haystack's ``ChatMessage`` names (``is_from``, ``tool_call_result``...).
"""

from __future__ import annotations

# Private helpers are re-exported (``x as x``) so imports written before the split work.
from threadloom.messages.coerce import _ANY_MESSAGE as _ANY_MESSAGE
from threadloom.messages.coerce import _from_tuple as _from_tuple
from threadloom.messages.coerce import (
    coerce_message,
    convert_to_messages,
    message_from_dict,
    message_to_dict,
)
from threadloom.messages.records import (
    InvalidToolCall,
    ToolCall,
    ToolCallChunk,
    make_tool_call,
    new_tool_call_id,
    parse_tool_args,
)
from threadloom.messages.spellings import ChatRole, ToolCallResult, ToolCallView
from threadloom.messages.types import _DEVELOPER_FLAG as _DEVELOPER_FLAG
from threadloom.messages.types import _M as _M
from threadloom.messages.types import _ROLE_CLASSES as _ROLE_CLASSES
from threadloom.messages.types import (
    REMOVE_ALL_MESSAGES,
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    UsageMetadata,
    add_usage,
    construct_unchecked,
)
from threadloom.messages.types import _add_content as _add_content
from threadloom.messages.types import _add_opt as _add_opt
from threadloom.messages.types import _fast_new as _fast_new
from threadloom.messages.types import _field_defaults as _field_defaults
from threadloom.messages.types import _find_chunk as _find_chunk
from threadloom.messages.types import _merge_meta as _merge_meta
from threadloom.messages.types import _merge_tool_call_chunks as _merge_tool_call_chunks
from threadloom.messages.wire import _ai_from_openai as _ai_from_openai
from threadloom.messages.wire import _ai_to_openai as _ai_to_openai
from threadloom.messages.wire import _wire_call as _wire_call
from threadloom.messages.wire import (
    message_from_openai,
    to_openai_messages,
)

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "AIMessage",
    "AIMessageChunk",
    "AnyMessage",
    "BaseMessage",
    "ChatRole",
    "HumanMessage",
    "InvalidToolCall",
    "RemoveMessage",
    "SystemMessage",
    "ToolCall",
    "ToolCallChunk",
    "ToolCallResult",
    "ToolCallView",
    "ToolMessage",
    "UsageMetadata",
    "add_usage",
    "coerce_message",
    "construct_unchecked",
    "convert_to_messages",
    "make_tool_call",
    "message_from_dict",
    "message_from_openai",
    "message_to_dict",
    "new_tool_call_id",
    "parse_tool_args",
    "to_openai_messages",
]
