"""What a tool returned, as ``ToolNode`` hands it on: checked, then combined into the
node's result.

A tool may return a plain value (its ``ToolMessage`` is made), a ``ToolMessage``, a
``Command``, or a list of ``Command``s and ``ToolMessage``s. As LangGraph's ``ToolNode``:
the ``ToolMessage`` answering the call (its *terminator*) gets the call's name; a list
must hold exactly one terminator (at its top level or in a ``Command``'s messages); the
node's result is ``{messages_key: [...]}`` when no tool returned a ``Command``, else one
item per output in call order (``Command``s as they are, messages as
``{messages_key: [message]}``), parent ``Command``s that only send merged into one last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

from threadloom.messages import REMOVE_ALL_MESSAGES, BaseMessage, RemoveMessage, ToolMessage
from threadloom.messages.build import construct_complete
from threadloom.tools import format_tool_output
from threadloom.tools.markers import state_update_of
from threadloom.types import Command, Send

InputKind = Literal["dict", "list", "tool_calls"]
Missing = Literal["raise", "answer", "skip"]
Output = ToolMessage | Command | list[ToolMessage | Command]
__all__ = ["InputKind", "Missing", "Output", "agent_shape", "check_command", "check_list",
           "combine", "to_output"]


def _removes_all(messages: Sequence[Any]) -> bool:
    return (len(messages) == 1 and isinstance(messages[0], RemoveMessage)
            and messages[0].id == REMOVE_ALL_MESSAGES)


def check_command(command: Command, call_id: str, name: str, key: str, kind: InputKind,
                  *, missing: Missing = "raise") -> Output:
    """``command`` with its terminator (the ``ToolMessage`` answering ``call_id``) named
    after the tool, as LangGraph's ``ToolNode``.

    A ``Command`` to this graph without a terminator: ``missing="raise"`` raises
    ``ValueError`` (LangGraph's); ``"answer"`` puts an "updated the state" terminator in
    front of it (``ToolNode(answer_commands=True)``, the agent's); ``"skip"`` leaves it
    (an item of a list, whose terminator ``check_list`` counts). A ``Command`` that
    removes every message needs none.

    Raises:
        ValueError: a dict ``update`` for a ``ToolNode`` given a list of messages, or a
            list ``update`` for one given a state; a missing terminator under ``"raise"``
            (as LangGraph, with its text).
    """
    update = command.update
    if isinstance(update, dict):
        if kind == "list":
            raise ValueError(
                "Tools can provide a dict in Command.update only when using dict with "
                f"'{key}' key as ToolNode input, got: {update} for tool '{name}'")
        messages = update.get(key)
        messages = list(messages) if isinstance(messages, list | tuple) else []
    elif isinstance(update, list):
        if kind != "list":
            raise ValueError(
                "Tools can provide a list of messages in Command.update only when using "
                f"list of messages as ToolNode input, got: {update} for tool '{name}'")
        messages = list(update)
    else:
        return command
    if _removes_all(messages):
        return command
    found = False
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            found = True
            if message.name != name:
                messages[i] = message.model_copy(update={"name": name})
    if found:
        new_update: Any = {**update, key: messages} if isinstance(update, dict) else messages
        command = dataclasses.replace(command, update=new_update)
    elif missing != "skip" and command.graph is None:
        if missing == "raise":
            raise ValueError(_missing_text(name, messages, kind, key))
        keys = ", ".join(sorted(update)) if isinstance(update, dict) else key
        text = f"Tool {name!r} updated the state (keys: {keys})."
        return [ToolMessage(content=text, tool_call_id=call_id, name=name), command]
    return command


def _missing_text(name: str, messages: list[Any], kind: InputKind, key: str) -> str:
    """LangGraph's text for a ``Command`` that answers no tool call."""
    example = (f'`Command(update={{"{key}": [ToolMessage("Success", tool_call_id=tool_call_id)'
               ', ...]}, ...)`' if kind != "list" else
               '`Command(update=[ToolMessage("Success", tool_call_id=tool_call_id), ...], ...)`')
    return (f"Expected to have a matching ToolMessage in Command.update for tool {name!r}, "
            f"got: {messages}. Every tool call (LLM requesting to call a tool) in the "
            "message history MUST have a corresponding ToolMessage. You can fix it by "
            f"modifying the tool to return {example}.")


def check_list(items: list[Any], call_id: str, name: str, key: str,
               kind: InputKind) -> list[ToolMessage | Command]:
    """A list of ``Command``s and ``ToolMessage``s a tool returned, checked.

    Raises:
        ValueError: it holds no terminator or more than one (LangGraph's text: "N
            messages bound to tool_call_id ..."), or a ``Command`` fails ``check_command``.
    """
    count = 0
    for item in items:
        if isinstance(item, ToolMessage):
            count += item.tool_call_id == call_id
        elif isinstance(item.update, dict):
            count += sum(1 for m in item.update.get(key) or () if isinstance(m, ToolMessage)
                         and m.tool_call_id == call_id)
    if count != 1:
        raise ValueError(
            f"Tool {name} returned a list with {count} messages bound to tool_call_id "
            f"{call_id!r}; expected exactly one terminating ToolMessage.")
    out: list[ToolMessage | Command] = []
    for item in items:
        if isinstance(item, Command):
            checked = check_command(item, call_id, name, key, kind, missing="skip")
            out.extend(checked if isinstance(checked, list) else [checked])
        elif item.tool_call_id == call_id and item.name != name:
            out.append(item.model_copy(update={"name": name}))
        else:
            out.append(item)
    return out


def combine(outputs: Sequence[Output], kind: InputKind, key: str) -> Any:
    """The node's result for the outputs of its calls (in call order), LangGraph's shape.

    No ``Command``: ``{key: [ToolMessage, ...]}`` (a list input: the list itself).
    Else a list, one item per output: a ``Command`` as is, a message as ``{key: [m]}``
    (``[m]`` for a list input); parent ``Command``s whose ``goto`` is all ``Send``s
    become one parent ``Command``, last.
    """
    flat: list[ToolMessage | Command] = []
    for output in outputs:
        if isinstance(output, list):
            flat.extend(output)
        else:
            flat.append(output)
    if not any(isinstance(o, Command) for o in flat):
        return flat if kind == "list" else {key: flat}
    items: list[Any] = []
    sends: list[Send] = []
    for output in flat:
        if not isinstance(output, Command):
            items.append([output] if kind == "list" else {key: [output]})
        elif (output.graph == Command.PARENT and isinstance(output.goto, list | tuple)
              and output.goto and all(isinstance(s, Send) for s in output.goto)
              and output.update is None and output.resume is None):
            sends.extend(output.goto)
        else:
            items.append(output)
    if sends:
        items.append(Command(graph=Command.PARENT, goto=sends))
    return items


def to_output(value: Any, call_id: str, name: str, kind: InputKind, key: str,
              state_keys: frozenset[str] | None, selected: Any, missing: Missing = "raise"
              ) -> Output:
    """What a tool returned as the node hands it on: a ``ToolMessage`` (its call's id
    and name filled in), a checked ``Command`` or list (``missing``: what a ``Command``
    without a terminator gets, see ``check_command``), the agent's state update
    (``state_update_of``, when ``state_keys`` is given; answered "updated the state"),
    content blocks as a message's content, anything else as ``format_tool_output`` text.

    Raises:
        ValueError: a ``Command`` or a list that ``check_command``/``check_list`` refuse.
    """
    if isinstance(value, ToolMessage):
        fill = {"tool_call_id": value.tool_call_id or call_id, "name": value.name or name}
        return value.model_copy(update=fill)
    if isinstance(value, Command):
        return check_command(value, call_id, name, key, kind, missing=missing)
    if isinstance(value, list) and value and all(
            isinstance(v, Command | ToolMessage) for v in value):
        return check_list(value, call_id, name, key, kind)
    if state_keys is not None and type(value) is dict:
        command = state_update_of(value, selected, state_keys)
        if command is not None:
            return check_command(command, call_id, name, key, kind, missing="answer")
    if isinstance(value, list) and _is_blocks(value):
        return ToolMessage(content=value, tool_call_id=call_id, name=name)
    text = format_tool_output(value)
    if type(call_id) is str and type(name) is str:  # all in shape: skip re-validation
        return construct_complete(ToolMessage, {  # every field, in declaration order
            "content": text, "id": None, "name": name, "additional_kwargs": {},
            "response_metadata": {}, "type": "tool", "tool_call_id": call_id,
            "status": "success", "artifact": None}, _RESULT_FIELDS)
    return ToolMessage(content=text, tool_call_id=call_id, name=name)


def _is_blocks(value: list[Any]) -> bool:
    """Whether a list is OpenAI content parts (``[{"type": "text", ...}, ...]``)."""
    return bool(value) and all(isinstance(v, dict) and "type" in v for v in value)


_RESULT_FIELDS = ("content", "tool_call_id", "name")  # what a plain result sets


def agent_shape(output: Output, split: Callable[[Command], tuple[list[ToolMessage], Command]]
                ) -> ToolMessage | tuple[list[ToolMessage], Command | list[Command]]:
    """An output as the agent's tool step takes it: a ``ToolMessage``, or (the call's
    messages, its ``Command``(s)) with ``split`` moving a ``Command``'s terminator out."""
    if isinstance(output, ToolMessage):
        return output
    if isinstance(output, Command):
        return split(output)
    found: list[ToolMessage] = []
    commands: list[Command] = []
    for item in output:
        if isinstance(item, Command):
            mine, command = split(item)
            found.extend(mine)
            commands.append(command)
        else:
            found.append(item)
    return found, commands[0] if len(commands) == 1 else commands


def is_messages(value: Any) -> bool:
    """Whether a list holds messages only (a ``ToolNode`` given a list of messages)."""
    return bool(value) and all(isinstance(v, BaseMessage) for v in value)
