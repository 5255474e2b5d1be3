"""What one model call and one tool call receive, and how the model request is made valid.

``ModelRequest`` and ``ToolCallRequest`` are what ``wrap_model_call`` / ``wrap_tool_call``
middleware see (as LangChain's of the same names). ``request_messages`` builds the list a
chat model is sent: exactly one system prompt, at index 0, never stored in the history
(case H24). ``repair_tool_pairs`` is the guarantee that every tool call in a history has
exactly one tool result right after its assistant message, whatever hooks, interrupts or
rejections did (case H04), so no provider answers 400 for a dangling tool call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from threadloom.engine.runtime import current_task
from threadloom.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from threadloom.nodes.tool_request import ToolCallRequest

SKIPPED = "Error: tool call {name!r} was not run: {why}."
MISSING_RESULT = (
    "Error: tool call {name!r} (id {id}) has no result: it was interrupted or skipped "
    "before it returned one, so it may not have run. Call it again if it is still needed."
)


@dataclass(slots=True)
class RunOptions:
    """Per-run options that are not state (never checkpointed).

    Attributes:
        hook_context: handed to hooks taking ``(state, context)``.
        generation_kwargs: merged over the agent's (run-time keys win).
        streaming_callback: called with each ``AIMessageChunk`` of every model call.
        tool_results: the callback also gets each tool result (a ``ToolMessage``).
        extra_tools: ``Tool`` objects given at run time beyond the configured ones.
        tool_names: names of the tools offered in this run (None: all configured ones).
        trace: OpenTelemetry spans are recorded (checked once per run).
        user_context: the ``context=`` object of the call (middleware ``runtime.context``).
    """

    hook_context: Any = None
    generation_kwargs: dict[str, Any] | None = None
    streaming_callback: Callable[[Any], Any] | None = None
    tool_results: bool = False
    extra_tools: tuple[Any, ...] = ()
    user_context: Any = None
    tool_names: tuple[str, ...] | None = None
    trace: bool = False


NO_OPTIONS = RunOptions()


@dataclass(slots=True)
class ModelRequest:
    """One model call, as ``wrap_model_call`` middleware sees it (LangChain's ``ModelRequest``).

    Attributes:
        model: the chat model to call.
        messages: the history to send, without the system prompt.
        system_prompt: the system prompt text (sent first), or None.
        tools: ``Tool`` objects and OpenAI tool dicts offered to the model.
        tool_choice: ``"auto"``/``"none"``/``"required"``/a tool name, or None.
        response_format: an OpenAI ``response_format`` dict (native structured output).
        generation_kwargs: ``temperature``, ``max_tokens``...
        state: the agent state (read-only view) at the time of the call.
        config: the run config (``configurable`` holds ``thread_id``...).
        runtime: the engine ``Runtime`` (``runtime.context`` is the call's ``context=``).
        merge_system_messages: join every system message into the leading one.
    """

    model: Any
    messages: list[BaseMessage]
    system_prompt: str | None = None
    tools: list[Any] = field(default_factory=list)
    tool_choice: Any = None
    response_format: Any = None
    generation_kwargs: dict[str, Any] = field(default_factory=dict)
    state: Any = None
    config: dict[str, Any] = field(default_factory=dict)
    runtime: Any = None
    merge_system_messages: bool = False

    def override(self, **changes: Any) -> ModelRequest:
        """A copy with ``changes`` applied (as LangChain's ``ModelRequest.override``)."""
        return dataclasses.replace(self, **changes)

    def request_messages(self) -> list[BaseMessage]:
        """The exact list sent to the model (see ``request_messages``)."""
        return request_messages(self.system_prompt, self.messages, self.merge_system_messages)


_SYSTEM_CACHE: dict[str, SystemMessage] = {}


def system_message(text: str) -> SystemMessage:
    """A (cached, shared) ``SystemMessage`` for a system prompt text."""
    message = _SYSTEM_CACHE.get(text)
    if message is None:
        if len(_SYSTEM_CACHE) > 256:
            _SYSTEM_CACHE.clear()
        message = _SYSTEM_CACHE[text] = SystemMessage(text, id="system_prompt")
    return message


def _contentless(message: BaseMessage) -> bool:
    return message.type == "ai" and not message.content and not (
        message.tool_calls or message.invalid_tool_calls  # type: ignore[attr-defined]
        or message.refusal)  # type: ignore[attr-defined]


def request_messages(
    system_prompt: str | None, history: Sequence[BaseMessage], merge: bool = False
) -> list[BaseMessage]:
    """The message list sent to the model: the system prompt first, then ``history``.

    Args:
        system_prompt: the rendered system prompt, or None/empty for none.
        history: the stored conversation (it never holds the system prompt).
        merge: join every system message (the prompt and any in ``history``, in order)
            into one leading system message, for chat templates that reject a system
            message anywhere but first (vLLM, LM Studio, MLX; case H24). Off: the order
            is sent unchanged.

    An assistant message with no content, no tool calls and no refusal (left when an
    adapter dropped a malformed tool call, case H12) is left out: providers refuse it.

    Returns:
        A new list.
    """
    head = [system_message(system_prompt)] if system_prompt else []
    if any(map(_contentless, history)):
        history = [m for m in history if not _contentless(m)]
    messages = [*head, *history]
    if merge:
        from threadloom.prompts import merge_system_messages

        return merge_system_messages(messages)
    return messages


def _calls_of(message: AIMessage) -> list[tuple[str, str]]:
    calls = [(c.get("id") or "", c.get("name") or "") for c in message.tool_calls]
    calls += [(c.get("id") or "", c.get("name") or "") for c in message.invalid_tool_calls]
    return calls


def _pairs_valid(messages: Sequence[BaseMessage]) -> bool:
    """Whether every assistant message with calls is followed at once by exactly one
    result per call, in call order, and no other tool message appears."""
    expected: list[str] = []  # the current calls still to answer, last one first
    message: Any  # a ToolMessage where type is "tool", an AIMessage where it is "ai"
    for message in messages:
        kind = message.type
        if kind == "tool":
            if not expected or expected[-1] != message.tool_call_id:
                return False
            expected.pop()
        elif expected:
            return False
        elif kind == "ai":
            calls = message.tool_calls
            if message.invalid_tool_calls:
                expected = [call_id for call_id, _ in reversed(_calls_of(message))]
            elif len(calls) == 1:  # the usual case
                expected = [calls[0].get("id") or ""]
                continue
            elif calls:
                expected = [c.get("id") or "" for c in reversed(calls)]
            else:
                continue
            if len(expected) > 1 and len(set(expected)) < len(expected):
                return False  # two calls share an id: one result cannot answer both
    return not expected


def repair_tool_pairs(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Give every tool call exactly one result, right after its assistant message.

    For each ``AIMessage`` with calls, its results follow it at once, in call order; a
    call with no result gets an error ``ToolMessage`` saying it was interrupted or
    skipped (``MISSING_RESULT``); duplicate results and orphan ``ToolMessage`` s (no
    preceding call with that id) are dropped. Other messages keep their order.

    Args:
        messages: the history.

    Returns:
        ``messages`` itself when it was already valid, else a new list.
    """
    if _pairs_valid(messages):
        return messages
    owner: dict[str, int] = {}
    results: dict[int, dict[str, ToolMessage]] = {}
    message: Any  # a ToolMessage where type is "tool", an AIMessage where it is "ai"
    for index, message in enumerate(messages):
        if message.type == "tool":
            call_id = message.tool_call_id
            ai_index = owner.get(call_id)
            got = results.get(ai_index) if ai_index is not None else None
            if got is not None and call_id not in got:  # else an orphan or a duplicate
                got[call_id] = message
        elif message.type == "ai" and (message.tool_calls or message.invalid_tool_calls):
            for call_id, _ in _calls_of(message):
                owner[call_id] = index
            results[index] = {}
    return _rebuild(messages, results)


def _rebuild(
    messages: list[BaseMessage], results: dict[int, dict[str, ToolMessage]]
) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if message.type == "tool":
            continue
        out.append(message)
        got = results.get(index)
        if got is None:
            continue
        for call_id, name in _calls_of(message):  # type: ignore[arg-type]
            found = got.get(call_id)
            out.append(found if found is not None else missing_result(call_id, name))
    return out


def missing_result(call_id: str, name: str, text: str | None = None) -> ToolMessage:
    """An error ``ToolMessage`` answering a call that produced no result."""
    content = text or MISSING_RESULT.format(name=name, id=call_id)
    return ToolMessage(content=content, tool_call_id=call_id, name=name or None, status="error")


def run_options() -> RunOptions:
    """The running call's ``RunOptions`` (defaults outside an agent run)."""
    task = current_task()
    context = task.context if task is not None else None
    return context if isinstance(context, RunOptions) else NO_OPTIONS


def answer_pending(messages: list[BaseMessage], why: str) -> list[BaseMessage]:
    """Answer the last AI message's unanswered calls with 'not run' errors (keeps pairs valid)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.type == "ai":
            calls = [*message.tool_calls, *message.invalid_tool_calls]  # type: ignore[attr-defined]
            if not calls:
                return messages
            done = {m.tool_call_id for m in messages[index + 1:] if m.type == "tool"}  # type: ignore[attr-defined]
            extra = [missing_result(c.get("id") or "", c.get("name") or "",
                                    SKIPPED.format(name=c.get("name"), why=why))
                     for c in calls if c.get("id") not in done]
            return [*messages, *extra] if extra else messages
    return messages


def check_tool_pairs(messages: Sequence[BaseMessage]) -> list[str]:
    """Problems with call/result pairing in ``messages`` (empty when valid).

    The check an OpenAI-style server makes: every assistant message with tool calls is
    followed at once by exactly one tool message per call id, and no tool message
    answers a call that is not pending.
    """
    problems: list[str] = []
    pending: list[str] = []
    for i, message in enumerate(messages):
        if message.type == "tool":
            call_id = cast(ToolMessage, message).tool_call_id
            if not pending or call_id not in pending:
                problems.append(f"message {i}: tool result {call_id!r} has no pending call")
            else:
                pending.remove(call_id)
            continue
        if pending:
            problems.append(f"message {i}: calls {pending} have no result")
            pending = []
        if message.type == "ai":
            pending = [cid for cid, _ in _calls_of(message)]  # type: ignore[arg-type]
    if pending:
        problems.append(f"end: calls {pending} have no result")
    return problems


__all__ = [
    "MISSING_RESULT", "NO_OPTIONS", "SKIPPED", "ModelRequest", "RunOptions",
    "ToolCallRequest", "answer_pending", "check_tool_pairs", "missing_result",
    "repair_tool_pairs", "request_messages", "run_options", "system_message",
]
