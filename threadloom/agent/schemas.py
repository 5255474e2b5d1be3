"""The agent's state schemas: ``AgentState`` plus the user's keys (``state_schema``,
middleware ``state_schema``) and template variables, built into the TypedDicts the
agent graph runs on."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict, get_type_hints

from threadloom.agent.agent_state import OUTPUT_KEYS, RUN_ARGUMENTS, AgentState, overwritable
from threadloom.agent.state import RESERVED_KEYS, default_handler, validate_user_schema
from threadloom.reducers import replace_values

HOOK_ONLY_KEYS = frozenset({"continue_run", "hook_context"})
"""Keys hooks set or read that the nodes consume at once: no graph channel needed."""
NODE_KEYS = frozenset({"before_run", "model", "tools", "exit_check", "after_run"})
OWNED_KEYS = frozenset({"step_count", "token_usage", "tool_call_counts", "exit_reason",
                        "last_message", "structured_response", "continue_run", "stop_run",
                        "jump_to", "context_tokens"})
"""Keys the agent writes during a run; a run's input may not set them, and the input
schema leaves them out (as LangChain omits ``structured_response`` and ``jump_to``)."""


@dataclass(slots=True)
class Schemas:
    """The state schemas of one agent (built by ``build_schemas``).

    Attributes:
        state: the full state TypedDict (agent keys, user keys, template variables).
        output: the TypedDict of what a run returns.
        input: the TypedDict of what a run takes (``state`` without ``OWNED_KEYS``).
        hook_entries: user keys as ``State`` schema entries.
        reduced: user keys whose channel merges writes through a handler.
        defaults: user keys' default values (pydantic defaults).
    """

    state: Any
    output: Any
    input: Any
    hook_entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    reduced: frozenset[str] = frozenset()
    defaults: dict[str, Any] = field(default_factory=dict)


def _user_fields(schema: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(annotations, hook entries, defaults)`` of the user's extra keys."""
    base = set(AgentState.__annotations__)
    if isinstance(schema, Mapping):
        fields: dict[str, Any] = {}
        entries: dict[str, Any] = {}
        for key, entry in schema.items():
            handler = entry.get("handler") or default_handler(key, entry["type"])
            entries[key] = {"type": entry["type"], "handler": handler}
            fields[key] = entry["type"] if handler is replace_values else Annotated[
                entry["type"], overwritable(handler)]
        return fields, entries, {}
    hints = get_type_hints(schema, include_extras=True)
    fields, entries, defaults = {}, {}, {}
    model_fields = getattr(schema, "model_fields", {})
    for key, hint in hints.items():
        if key in base or key.startswith("_"):
            continue
        tp, reducer = hint, None
        if typing.get_origin(hint) is Annotated:
            tp, *meta = typing.get_args(hint)
            reducer = next((m for m in meta if callable(m) and not isinstance(m, type)), None)
        entries[key] = {"type": tp, "handler": reducer or replace_values}
        fields[key] = Annotated[tp, overwritable(reducer)] if reducer else tp
        info = model_fields.get(key)
        if info is not None and not info.is_required():
            defaults[key] = info.get_default(call_default_factory=True)
    return fields, entries, defaults


def build_schemas(state_schema: Any, variables: Sequence[str] | Mapping[str, str],
                  strategy: Any,
                  middleware_schemas: Sequence[Any] = ()) -> Schemas:
    """Build the agent's state and output TypedDicts.

    The user keys are those of every middleware's ``state_schema`` (in middleware order),
    then those of ``state_schema``, which wins for a key both declare (LangChain's
    priority: ``create_agent(state_schema=...)`` over ``AgentMiddleware.state_schema``).

    Raises:
        ValueError: a reserved key in ``state_schema``, a key named like an agent node, or
            a template variable colliding with a state key or run argument.
    """
    hints = get_type_hints(AgentState, include_extras=True)
    fields: dict[str, Any] = {k: v for k, v in hints.items() if k not in HOOK_ONLY_KEYS}
    user: dict[str, Any] = {}
    entries: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for schema in [*middleware_schemas, state_schema]:
        if schema is None or schema is AgentState:
            continue
        validate_user_schema(schema, inherited=AgentState.__annotations__)
        more_fields, more_entries, more_defaults = _user_fields(schema)
        user.update(more_fields)
        entries.update(more_entries)
        defaults.update(more_defaults)
    clash = sorted(set(user) & NODE_KEYS)
    if clash:
        raise ValueError(f"state_schema keys {clash} are agent node names; rename them")
    taken = set(fields) | set(user) | RUN_ARGUMENTS | RESERVED_KEYS
    for name in sorted(set(variables) & taken):
        where = variables.get(name) if isinstance(variables, Mapping) else None
        source = where or "system_prompt/user_prompt"
        what = ("conflicts with input names in the run method" if name in RUN_ARGUMENTS
                else "is already defined in the state schema")
        raise ValueError(f"Variable {name!r} from {source} {what}. Rename the variable or "
                         "remove it from the prompt to avoid the conflict.")
    if strategy is not None:
        fields["structured_response"] = strategy.schema | None
    fields.update(user)
    fields.update({name: Any for name in variables})
    out_keys = [*OUTPUT_KEYS, *(["structured_response"] if strategy else []), *user]
    # The keys are known only at run time, which a type checker cannot follow.
    state = TypedDict("AgentRunState", fields, total=False)  # type: ignore[misc]
    output_fields = {k: fields[k] for k in out_keys}
    output = TypedDict("AgentOutput", output_fields, total=False)  # type: ignore[misc]
    inputs = {k: v for k, v in fields.items() if k not in OWNED_KEYS}
    input_schema = TypedDict("AgentInput", inputs, total=False)  # type: ignore[misc]
    reduced = frozenset(k for k, v in user.items() if typing.get_origin(v) is Annotated)
    return Schemas(state, output, input_schema, entries, reduced, defaults)


__all__ = ["HOOK_ONLY_KEYS", "NODE_KEYS", "OWNED_KEYS", "Schemas", "build_schemas"]
