"""Tool calls for chat models without native tool support (JSON-schema prompting).

Some servers (llama.cpp with a plain chat template, many Ollama/vLLM models) ignore the
`tools` request field. `OpenAIChatModel(tool_calling="json_schema")` then sends the
request through :func:`build_request`, which

- rewrites the conversation so a plain chat template can render it: earlier assistant
  tool calls become JSON text, tool results become user turns;
- tells the model, in a system message, which tools exist and how to answer;
- constrains the reply with a JSON-schema `response_format` whose `anyOf` has one branch
  per tool (`{"name": <const>, "arguments": <parameters schema>}`) plus a final-answer
  branch (`{"final_answer": <string>}`), so the sampled text is always one of them;

and turns the reply text back into an OpenAI-style assistant message with
:func:`parse_reply`, so the agent loop cannot tell it from a native tool call.
The same idea appears in Ollama's and Outlines' "function calling by grammar" recipes.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

__all__ = ["FINAL_ANSWER_KEY", "SCHEMA_NAME", "build_request", "parse_reply"]

#: Key of the final-answer branch of the reply schema.
FINAL_ANSWER_KEY = "final_answer"
#: `json_schema.name` sent in `response_format`.
SCHEMA_NAME = "tool_call_or_final_answer"

_INSTRUCTIONS = (
    "You can call tools. Reply with exactly one JSON object and nothing else:\n"
    '- to call a tool: {{"name": "<tool name>", "arguments": {{...}}}}\n'
    '- to answer the user: {{"{final}": "<your answer>"}}\n'
    "Call a tool when it helps; once a tool result is given, use it to answer.\n"
    "Tools:\n{tools}"
)
_ANSWER_NOW = (
    "The tool results are above. Answer the user now with exactly one JSON object:\n"
    '{{"{final}": "<your answer>"}}'
)
_RESULT_PREFIX = "Result of tool {name}:"


def build_request(
    messages: list[dict], tools: list[dict], *, max_tool_rounds: int | None = None
) -> dict[str, Any]:
    """Build the request overrides for JSON-schema tool calling.

    Args:
        messages: the conversation in OpenAI chat-completions wire format (dicts with
            `role`, `content`, and for assistants optionally `tool_calls`; tool results as
            `{"role": "tool", "tool_call_id", "content"}`).
        tools: OpenAI tool dicts (`{"type": "function", "function": {"name",
            "description", "parameters"}}`); bare function dicts are accepted too.
        max_tool_rounds: when the conversation already holds this many assistant
            tool-call turns after the last user message, only the final-answer branch is
            offered, so the reply must be text. `None` (default) never narrows. Small
            models (SmolLM2-135M) tend to repeat a call forever; 1 makes them answer.

    Returns:
        A dict of request keyword overrides: `messages` (rewritten, with no `tool`
        role and no `tool_calls` left) and `response_format` (`type` `"json_schema"`).
        The caller sends these instead of `messages`, and must not send `tools` or
        `tool_choice` (a template without a tools section ignores them, a server with
        one would be confused by both).

    Raises:
        ValueError: a tool has no name, or two tools share a name.
    """
    functions = _functions(tools)
    if max_tool_rounds is not None and _tool_rounds(messages) >= max_tool_rounds:
        schema = reply_schema([])
        system = _ANSWER_NOW.format(final=FINAL_ANSWER_KEY)
    else:
        schema = reply_schema(functions)
        system = _INSTRUCTIONS.format(final=FINAL_ANSWER_KEY, tools=_describe(functions))
    rewritten = [_rewrite(message, messages) for message in messages]
    if rewritten and rewritten[0].get("role") in ("system", "developer"):
        first = rewritten[0]
        rewritten[0] = {"role": "system", "content": f"{_text(first.get('content'))}\n\n{system}"}
    else:
        rewritten.insert(0, {"role": "system", "content": system})
    return {
        "messages": rewritten,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": schema},
        },
    }


def reply_schema(functions: list[dict]) -> dict[str, Any]:
    """The JSON schema of one reply: an `anyOf` of one branch per tool, then the answer.

    Args:
        functions: function dicts (`name`, optional `description`, `parameters`).

    Returns:
        `{"anyOf": [...]}`; each tool branch requires `name` (a `const`) and `arguments`
        (the tool's parameters schema, `{"type": "object"}` when it has none).
    """
    branches: list[dict[str, Any]] = []
    for function in functions:
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    branches.append(
        {
            "type": "object",
            "properties": {FINAL_ANSWER_KEY: {"type": "string"}},
            "required": [FINAL_ANSWER_KEY],
            "additionalProperties": False,
        }
    )
    return {"anyOf": branches}


def parse_reply(text: str | None, tools: list[dict]) -> dict[str, Any]:
    """Turn a reply produced under :func:`build_request`'s schema into an assistant message.

    Args:
        text: the reply's content (the whole streamed text, once complete).
        tools: the same tool dicts given to :func:`build_request`.

    Returns:
        An OpenAI wire-format assistant message: `{"role": "assistant", "content": str,
        "tool_calls": [...]}`. A tool call has `id` (`"call_" + hex`), `type`
        `"function"` and `function` `{"name", "arguments": <JSON string>}`. A
        final-answer reply, or a reply that is not a JSON object naming a known tool
        (malformed, truncated, unknown tool), becomes a plain text answer: the
        `final_answer` string when there is one (what was written of it, when the reply
        was cut off), otherwise the raw text. Never raises on model output.

    Raises:
        ValueError: only when `tools` itself is malformed (see :func:`build_request`).
    """
    names = {function["name"] for function in _functions(tools)}
    raw = text or ""
    try:
        data = json.loads(raw)
    except ValueError:
        return _text_message(_partial_answer(raw))
    if not isinstance(data, dict):
        return _text_message(raw)
    name = data.get("name")
    if isinstance(name, str) and name in names:
        arguments = data.get("arguments")
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):
            arguments_json = arguments
        else:
            arguments_json = json.dumps(arguments, ensure_ascii=False)
        call = {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": arguments_json},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    answer = data.get(FINAL_ANSWER_KEY)
    if isinstance(answer, str):
        return _text_message(answer)
    return _text_message(raw)


_PARTIAL_ANSWER = re.compile(r'\s*\{\s*"' + FINAL_ANSWER_KEY + r'"\s*:\s*"((?:[^"\\]|\\.)*)')


def _partial_answer(raw: str) -> str:
    """The text of a `final_answer` string cut off mid-way, else `raw` unchanged."""
    match = _PARTIAL_ANSWER.match(raw)
    if match is None:
        return raw
    body = match.group(1)
    for end in range(len(body), max(len(body) - 6, -1), -1):
        try:
            return json.loads(f'"{body[:end]}"')
        except ValueError:
            continue
    return raw


def _tool_rounds(messages: list[dict]) -> int:
    """Assistant tool-call turns after the last user message."""
    rounds = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant" and message.get("tool_calls"):
            rounds += 1
    return rounds


def _text_message(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": []}


def _functions(tools: list[dict]) -> list[dict]:
    """Function dicts from OpenAI tool dicts (or bare function dicts), names checked."""
    functions: list[dict] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"tools[{index}] has no function name: {tool!r}")
        if name in seen:
            raise ValueError(f"tools[{index}]: duplicate tool name {name!r}")
        seen.add(name)
        functions.append(function)
    return functions


def _describe(functions: list[dict]) -> str:
    lines = []
    for function in functions:
        parameters = function.get("parameters") or {}
        args = json.dumps(parameters.get("properties", {}), ensure_ascii=False)
        description = function.get("description") or ""
        lines.append(f"- {function['name']}: {description} Arguments: {args}".replace("  ", " "))
    return "\n".join(lines)


def _rewrite(message: dict, messages: list[dict]) -> dict[str, Any]:
    """One wire message in a form a plain chat template renders (string content only)."""
    role = message.get("role")
    if role == "tool":
        name = message.get("name") or _call_name(message.get("tool_call_id"), messages)
        prefix = _RESULT_PREFIX.format(name=name or "call")
        return {"role": "user", "content": f"{prefix}\n{_text(message.get('content'))}"}
    if role == "assistant" and message.get("tool_calls"):
        parts = [_text(message.get("content"))] if _text(message.get("content")) else []
        for call in message["tool_calls"]:
            function = call.get("function", {})
            parts.append(json.dumps(
                {"name": function.get("name"), "arguments": _loads(function.get("arguments"))},
                ensure_ascii=False,
            ))
        return {"role": "assistant", "content": "\n".join(parts)}
    rewritten = {"role": "system" if role == "developer" else role}
    content = message.get("content")
    rewritten["content"] = _text(content) if _text_only(content) else content
    return rewritten


def _call_name(call_id: Any, messages: list[dict]) -> str | None:
    for message in messages:
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return call.get("function", {}).get("name")
    return None


def _loads(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    return arguments if arguments is not None else {}


def _text_only(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" for part in content
    )


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict)
        )
    return str(content)
