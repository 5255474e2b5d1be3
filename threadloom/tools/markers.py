"""Injected-argument markers: parameters the engine fills and the model never sees.

``InjectedState`` and ``InjectedToolCallId`` mirror LangGraph's/LangChain's markers of the
same names; ``InjectedConfig`` (or a parameter named ``config``) receives the run config,
``InjectedIdempotencyKey`` a key that is stable across crash recovery.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args, get_origin

from threadloom.types import Command


class InjectedState:
    """Marks a parameter the engine fills with the graph state, hidden from the model.

    As LangGraph's ``InjectedState``: ``state: Annotated[dict, InjectedState]`` receives
    the whole state; ``Annotated[str, InjectedState("user_id")]`` receives one key (an
    item of a dict state, or an attribute of an object state; ``None`` when absent).

    Args:
        field: the state key to inject, or None for the whole state.
    """

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def __repr__(self) -> str:
        return f"InjectedState({self.field!r})"


class InjectedToolCallId:
    """Marks a parameter that receives the id of the tool call being run (a ``str``)."""


class InjectedConfig:
    """Marks a parameter that receives the run config dict (as LangChain's ``RunnableConfig``).

    A parameter named ``config`` is treated as marked, as in LangChain.
    """


class InjectedIdempotencyKey:
    """Marks a parameter that receives a stable key for this call (a ``str``).

    The key is ``"{thread_id}:{task_id}:{tool_call_id}"`` when the run has a thread; the
    engine's task id comes from the checkpoint the step started from, so a call re-run
    after a crash or a pause gets the same key. Without a thread: the tool call id.
    Pass it to external systems that deduplicate requests.
    """


_MARKERS = (InjectedState, InjectedToolCallId, InjectedConfig, InjectedIdempotencyKey)


def _injection(name: str, annotation: Any) -> Any:
    """Return the injection marker of a parameter (class or instance), or None."""
    candidates = [annotation]
    if get_origin(annotation) is Annotated:
        candidates = [get_args(annotation)[0], *annotation.__metadata__]
    for item in candidates:
        if any(item is marker for marker in _MARKERS) or isinstance(item, _MARKERS):
            return item
        if getattr(item, "__name__", "") == "RunnableConfig":
            return InjectedConfig
    return InjectedConfig if name == "config" else None


def _pack(state: Any, tool_call_id: Any, config: Any, key: Any) -> dict[str, Any]:
    return {
        "state": state,
        "tool_call_id": tool_call_id,
        "config": config if config is not None else {},
        "idempotency_key": key if key is not None else tool_call_id,
    }


def _injected_value(marker: Any, injections: dict[str, Any]) -> Any:
    """The value the engine passes for one injected parameter."""
    if marker is InjectedToolCallId or isinstance(marker, InjectedToolCallId):
        return injections["tool_call_id"]
    if marker is InjectedConfig or isinstance(marker, InjectedConfig):
        return injections["config"]
    if marker is InjectedIdempotencyKey or isinstance(marker, InjectedIdempotencyKey):
        return injections["idempotency_key"]
    state = injections["state"]
    field = marker.field if isinstance(marker, InjectedState) else None
    if field is None or state is None:
        return state
    if isinstance(state, dict):
        return state.get(field)
    return getattr(state, field, None)


def state_update_of(value: dict[Any, Any], selected: Any,
                    state_keys: frozenset[str]) -> Command | None:
    """A tool's dict result as a state update, or None when it is data.

    The rule (the LangChain agents guide's shopping cart): a tool that reads the state
    (a parameter marked ``InjectedState``) and returns a non-empty dict whose keys are
    all state keys updates the state with it, as if it had returned
    ``Command(update=value)``. Any other dict is data, sent to the model as JSON.
    Only a ``ToolNode`` given ``state_keys`` (the agent's) applies it; a plain
    ``ToolNode`` keeps LangGraph's behaviour (JSON text).
    """
    if not value or selected is None or not all(
            type(k) is str and k in state_keys for k in value):
        return None
    if not any(isinstance(m, InjectedState) or m is InjectedState
               for m in selected.injected_params.values()):
        return None
    return Command(update=dict(value))


__all__ = [
    "InjectedConfig", "InjectedIdempotencyKey", "InjectedState", "InjectedToolCallId",
    "state_update_of",
]
