"""``AgentState``: the keys every agent run keeps, their reducers, and the hook bridge.

The counters (``step_count``, ``token_usage``, ``tool_call_counts``) are reduced by
summing, so every writer only writes what it adds; writing ``None`` resets one (the
``before_run`` node does so: the counters are per run, as Haystack's). ``HookBridge``
turns the graph state into the live ``State`` hooks see and turns what hooks changed back
into graph writes (deltas for messages and counters, so a hook that appends one message
writes one message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import is_
from typing import Annotated, Any, TypedDict

from threadloom.agent.state import State
from threadloom.agent.usage import add_usage, sum_usage, usage_delta
from threadloom.checkpoint.serde import register
from threadloom.engine.channels import Ephemeral
from threadloom.messages import REMOVE_ALL_MESSAGES, AnyMessage, BaseMessage, RemoveMessage
from threadloom.messages.ids import uuid4_str
from threadloom.reducers import add_messages, merge_lists, replace_values

CONTROL_KEYS = ("jump_to", "stop_run", "continue_run")
JUMP_TARGETS = ("model", "tools", "end")


def sum_steps(current: int | None, update: int | None) -> int:
    """Reducer of ``step_count``: adds ``update``; ``None`` resets to 0."""
    if update is None:
        return 0
    return (current or 0) + update


Counts = Mapping[str, int] | None


def sum_counts(current: Counts, update: Counts) -> dict[str, int]:
    """Reducer of ``tool_call_counts`` (``{tool_name: n}``): adds per name; ``None`` resets."""
    if update is None:
        return {}
    out = dict(current or {})
    for name, n in update.items():
        out[name] = out.get(name, 0) + n
    return out


class AgentState(TypedDict, total=False):
    """The state of an agent run; extend it (as a TypedDict) to add your own keys.

    As LangChain's ``AgentState``, with Haystack's run bookkeeping:

    Attributes:
        messages: the conversation (``add_messages``); never holds the system prompt.
        last_message: the final message of the run (set by ``after_run``).
        step_count: model calls in this run (one step = one model call + its tool calls).
        token_usage: the usage of this run's model calls summed (``{"input_tokens",
            "output_tokens", "total_tokens"}``, or a Haystack generator's ``meta["usage"]``
            keys as given; ``{}`` when no reply reported usage): ``threadloom.agent.usage``.
        tool_call_counts: ``{tool_name: n}`` of calls executed in this run.
        exit_reason: why the run ended: ``"text"``, ``"length"``, ``"content_filter"``,
            a tool name, ``"structured_response"``, ``"max_agent_steps"``,
            ``"jump_to_end"`` or a hook's ``stop_run`` value.
        continue_run: set by an ``on_exit`` hook to go on instead of ending.
        stop_run: set by a hook to end the run; its value becomes ``exit_reason``.
        jump_to: set by a hook: ``"model"``, ``"tools"`` or ``"end"`` (lives one step).
        structured_response: the validated ``response_format`` object.
        context_tokens: the context size after the last model call (its total tokens,
            or an estimate of about four characters per token).
        hook_context: request-scoped objects handed to hooks (never checkpointed).

    ``tools`` is reserved too, but it is a run argument (the tools offered in one run),
    not a state key: a node of the agent graph is named ``tools``.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    last_message: AnyMessage | None
    step_count: Annotated[int, sum_steps]
    token_usage: Annotated[dict[str, Any], sum_usage]
    tool_call_counts: Annotated[dict[str, int], sum_counts]
    exit_reason: Any
    continue_run: Annotated[bool, Ephemeral]
    stop_run: Annotated[Any, Ephemeral]
    jump_to: Annotated[str | None, Ephemeral]
    structured_response: Any
    context_tokens: int
    hook_context: Any


OUTPUT_KEYS = (
    "messages", "last_message", "step_count", "token_usage", "tool_call_counts", "exit_reason",
)
"""Agent keys every run returns (plus ``structured_response`` and the user's keys)."""


@dataclass(frozen=True, slots=True)
class Overwrite:
    """A write that replaces a reduced user key's value instead of merging into it
    (allowed in the checkpoint codec: the writes of a step are saved)."""

    value: Any


register(Overwrite, name="threadloom.agent.Overwrite")


def overwritable(handler: Any) -> Any:
    """Wrap a state handler as a channel reducer that also accepts ``Overwrite``."""

    def reducer(current: Any, update: Any) -> Any:
        if isinstance(update, Overwrite):
            return update.value
        return handler(current, update)

    reducer.__name__ = getattr(handler, "__name__", "handler")
    reducer.__qualname__ = reducer.__name__
    return reducer


def messages_update(old: list[BaseMessage], new: list[BaseMessage]) -> list[BaseMessage]:
    """The ``add_messages`` update that turns ``old`` into ``new`` (empty when equal).

    Appends give only the new messages; in-place replacements give the replaced
    messages (same id); removals give ``RemoveMessage(id)``; anything else (reordering,
    insertions in the middle) gives ``RemoveMessage(REMOVE_ALL_MESSAGES)`` + ``new``.
    """
    if new is old:
        return []
    n = len(old)
    if len(new) >= n and all(map(is_, old, new)):
        return list(new[n:])
    new_ids = {m.id for m in new}
    removed = [m.id for m in old if m.id not in new_ids]
    gone = set(removed)
    survivors = [m for m in old if m.id not in gone]
    out: list[BaseMessage] = [RemoveMessage(id=i) for i in removed if i]
    old_ids = {m.id for m in old}
    for i, message in enumerate(new):
        if i < len(survivors):
            if message.id != survivors[i].id:
                return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]
            if message is not survivors[i]:
                out.append(message)
        elif message.id in old_ids:
            return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]
        else:
            out.append(message)
    return out


def settle_messages(old: list[BaseMessage], live: Any) -> list[BaseMessage]:
    """The messages after a hook point, as the graph's ``add_messages`` merges them.

    Hooks see ``messages`` as Haystack's ``State`` has it: ``set`` appends
    (``merge_lists``). What they leave is read as an ``add_messages`` update of ``old``:
    a message whose id is already there replaces that one, a ``RemoveMessage`` removes,
    a list set whole (``handler_override=replace_values``) replaces the history.
    """
    if live is old or not isinstance(live, list):
        return old
    delta = messages_update(old, live)
    return add_messages(old, delta) if delta else old


@dataclass(slots=True)
class Control:
    """What hooks asked for besides state writes."""

    jump_to: str | None = None
    stop_run: Any = None
    continue_run: bool = False


class HookBridge:
    """Builds the live ``State`` for hooks and turns its changes into graph writes.

    Args:
        schema: the hook ``State`` schema ``{key: {"type": T, "handler": fn}}`` covering
            every agent key and user key.
        reduced: user keys whose graph channel merges writes through their handler.
    """

    def __init__(self, schema: dict[str, dict[str, Any]], reduced: frozenset[str]) -> None:
        self.schema = schema
        self.reduced = reduced

    def make(self, values: Mapping[str, Any], messages: list[BaseMessage]) -> State:
        """A ``State`` over ``values`` (messages copied, so in-place edits stay local).

        Messages without an id get one first (as ``add_messages`` would give them), so a
        hook can replace a fresh message by id.
        """
        schema = self.schema
        data = {k: v for k, v in values.items() if k in schema}
        for message in messages:
            if not message.id:
                message.id = uuid4_str()
        data["messages"] = list(messages)
        return State(schema, data)

    def updates(
        self, state: State, before: Mapping[str, Any]
    ) -> tuple[dict[str, Any], Control]:
        """Graph writes (without ``messages``) and control requests from what hooks set.

        Raises:
            ValueError: ``jump_to`` is not ``"model"``, ``"tools"`` or ``"end"``.
        """
        update: dict[str, Any] = {}
        control = Control()
        for key, value in state.changes().items():
            if key in _VIEW_ONLY:
                continue
            if key in CONTROL_KEYS:
                _set_control(control, key, value)
            elif key == "step_count":
                update[key] = (value or 0) - (before.get(key) or 0)
            elif key == "token_usage":
                update[key] = usage_delta(value or {}, before.get(key) or {})
            elif key == "tool_call_counts":
                old = before.get(key) or {}
                names = set(old) | set(value or {})
                update[key] = {n: (value or {}).get(n, 0) - old.get(n, 0) for n in names}
            elif key in self.reduced:
                update[key] = _reduced_write(before.get(key), value)
            else:
                update[key] = value
        return update, control


_VIEW_ONLY = frozenset({"messages", "tools", "hook_context"})
"""Keys of the hook ``State`` that are not written back as they are (messages go as a
delta; ``tools`` and ``hook_context`` live for the run only)."""


def _set_control(control: Control, key: str, value: Any) -> None:
    if key == "jump_to":
        if value is not None and value not in JUMP_TARGETS:
            raise ValueError(f"jump_to must be one of {JUMP_TARGETS}, got {value!r}")
        control.jump_to = value
    elif key == "stop_run":
        control.stop_run = value
    else:
        control.continue_run = bool(value)


def _reduced_write(old: Any, new: Any) -> Any:
    if isinstance(old, list) and isinstance(new, list) and len(new) >= len(old) and all(
        map(is_, old, new)
    ):
        return new[len(old):]
    return Overwrite(new)


def add_delta(update: dict[str, Any], key: str, delta: Any) -> None:
    """Add a counter delta (int or dict of ints) to ``update[key]``."""
    current = update.get(key)
    if current is None:
        update[key] = delta
    elif isinstance(delta, dict):
        update[key] = add_usage(current, delta)
    else:
        update[key] = current + delta


def merge_hook_changes(update: dict[str, Any], changes: dict[str, Any]) -> None:
    """Fold a hook point's ``changes`` into a node's ``update``: the run counters
    (``step_count``, ``token_usage``, ``tool_call_counts``) add up, other keys replace."""
    for key, value in changes.items():
        if key in ("step_count", "token_usage", "tool_call_counts"):
            add_delta(update, key, value)
        else:
            update[key] = value


HOOK_TYPES: dict[str, Any] = {
    "step_count": int, "token_usage": dict[str, Any], "tool_call_counts": dict[str, int],
    "exit_reason": str, "continue_run": bool, "stop_run": str, "hook_context": dict[str, Any],
    "context_tokens": int,
}
"""The types Haystack's ``Agent`` declares for its state keys (``resolved_state_schema``)."""

HAYSTACK_KEYS = ("messages", "step_count", "token_usage", "tool_call_counts", "exit_reason",
                 "continue_run", "stop_run", "tools", "hook_context", "context_tokens")
"""The agent keys Haystack's ``State`` has; the others (``last_message``, ``jump_to``,
``structured_response``) are threadloom's."""


def hook_schema(
    user_entries: Mapping[str, dict[str, Any]], extra_keys: list[str]
) -> dict[str, Any]:
    """The ``State`` schema hooks see: agent keys, user entries, template variables."""
    schema: dict[str, dict[str, Any]] = {
        key: {"type": HOOK_TYPES.get(key, Any), "handler": replace_values}
        for key in AgentState.__annotations__
    }
    schema["messages"] = {"type": list[BaseMessage], "handler": merge_lists}
    schema["tools"] = {"type": list, "handler": replace_values}
    for key in extra_keys:
        schema.setdefault(key, {"type": Any, "handler": replace_values})
    schema.update(user_entries)
    return schema


RUN_ARGUMENTS = frozenset({
    "messages", "tools", "generation_kwargs", "streaming_callback", "hook_context", "config",
    "thread_id", "context", "stream_mode", "recursion_limit", "durability", "subgraphs",
})
"""Names ``run``/``invoke`` take as options; template variables may not use them."""
__all__ = [
    "HAYSTACK_KEYS", "HOOK_TYPES", "OUTPUT_KEYS", "RUN_ARGUMENTS", "AgentState", "Control",
    "HookBridge", "Overwrite",
    "add_delta", "hook_schema", "merge_hook_changes",
    "messages_update", "overwritable", "settle_messages", "sum_counts", "sum_steps",
    "sum_usage",
]
