"""Injected-argument markers: parameters the engine fills and the model never sees.

``InjectedState`` and ``InjectedToolCallId`` mirror LangGraph's/LangChain's markers of the
same names; ``InjectedConfig`` (or a parameter named ``config``) receives the run config,
``InjectedIdempotencyKey`` a key that is stable across crash recovery.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args, get_origin

from threadloom.tools.runtime import ToolRuntime, default_tool_runtime, is_tool_runtime
from threadloom.types import Command


class InjectedState:
    """Marks a parameter the engine fills with the graph state, hidden from the model.

    As LangGraph's ``InjectedState``: ``state: Annotated[dict, InjectedState]`` receives
    the whole state; ``Annotated[str, InjectedState("user_id")]`` receives one key (an
    item of a dict state, or an attribute of an object state). When the state lacks it,
    a parameter with a default keeps its default, else ``MissingStateKey`` (a
    ``KeyError``) or ``MissingStateAttribute`` is raised, as LangGraph raises.

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


class InjectedLiveState:
    """The marker of a parameter typed with a class that says ``__threadloom_injection__
    = "live_state"`` (the agent's ``State``, as Haystack: ``def tool(x: str, state: State)``,
    ``State | None`` or the string ``"State"``): it receives a live state object, the
    engine's own when it passes one, else ``cls.over(state_dict)``.

    Args:
        cls: the annotated class.
    """

    def __init__(self, cls: Any) -> None:
        self.cls = cls

    def __repr__(self) -> str:
        return f"InjectedLiveState({self.cls.__name__})"


class InjectedToolArg:
    """Marks a parameter the caller supplies and the model never sees (LangChain's
    ``InjectedToolArg``; subclass it for markers of your own): ``tool.invoke(args)``
    passes it from ``args``; a ``ToolNode`` drops what the model sent for it, so the
    tool gets its default (a required one is missing: the call fails).
    """


_MARKERS = (InjectedState, InjectedToolCallId, InjectedConfig, InjectedIdempotencyKey,
            InjectedToolArg)


def is_caller_arg(marker: Any) -> bool:
    """Whether a marker is an ``InjectedToolArg`` (its class, a subclass or an instance)."""
    return isinstance(marker, InjectedToolArg) or (
        isinstance(marker, type) and issubclass(marker, InjectedToolArg))


def _live_state_class(annotation: Any) -> Any:
    """The class of a live-state annotation (also inside ``X | None``), or None."""
    for item in (annotation, *get_args(annotation)):
        if getattr(item, "__threadloom_injection__", None) == "live_state":
            return item
    return None


def _injection(name: str, annotation: Any) -> Any:
    """Return the injection marker of a parameter (class or instance), or None."""
    candidates = [annotation]
    if get_origin(annotation) is Annotated:
        candidates = [get_args(annotation)[0], *annotation.__metadata__]
    for item in candidates:
        if is_tool_runtime(item):
            return ToolRuntime
        if any(item is marker for marker in _MARKERS) or isinstance(item, _MARKERS) or (
                isinstance(item, type) and issubclass(item, InjectedToolArg)):
            return item
        if getattr(item, "__name__", "") == "RunnableConfig":
            return InjectedConfig
        live = _live_state_class(item)
        if live is not None:
            return InjectedLiveState(live)
    return InjectedConfig if name == "config" else None


def _pack(state: Any, tool_call_id: Any, config: Any, key: Any,
          runtime: Any = None) -> dict[str, Any]:
    return {
        "state": state,
        "tool_call_id": tool_call_id,
        "config": config if config is not None else {},
        "idempotency_key": key if key is not None else tool_call_id,
        "runtime": runtime,
    }


def _injected_value(marker: Any, injections: dict[str, Any]) -> Any:
    """The value the engine passes for one injected parameter."""
    if marker is InjectedToolCallId or isinstance(marker, InjectedToolCallId):
        return injections["tool_call_id"]
    if marker is InjectedConfig or isinstance(marker, InjectedConfig):
        return injections["config"]
    if marker is InjectedIdempotencyKey or isinstance(marker, InjectedIdempotencyKey):
        return injections["idempotency_key"]
    if marker is ToolRuntime:
        runtime = injections["runtime"]
        return runtime if runtime is not None else default_tool_runtime(
            injections["state"], injections["tool_call_id"], injections["config"])
    state = injections["state"]
    if isinstance(marker, InjectedLiveState):
        return state if isinstance(state, marker.cls) else marker.cls.over(state)
    field = marker.field if isinstance(marker, InjectedState) else None
    if field is None or state is None:
        return state
    if isinstance(state, dict):
        if field in state:
            return state[field]
        if isinstance(state, MessagesOnlyState):
            raise StateShapeError(
                f"Invalid input to ToolNode: a tool requires the graph state dict as input; "
                f"the state should contain the field {field!r}")
        return ABSENT if injections.get("lenient") else _missing(MissingStateKey, field)
    if hasattr(state, field):
        return getattr(state, field)
    return ABSENT if injections.get("lenient") else _missing(MissingStateAttribute, field)


def _missing(kind: type[Exception], field: str) -> Any:
    raise kind(field)


ABSENT: Any = object()
"""What ``_injected_value`` gives for a missing state field of an optional parameter."""


class StateInjectionError(Exception):
    """An ``InjectedState`` parameter could not be filled from the state (as LangGraph:
    raised by ``ToolNode`` whatever ``handle_tool_errors`` says)."""


class MissingStateKey(StateInjectionError, KeyError):
    """A dict state lacks the key an ``InjectedState("key")`` parameter needs."""


class MissingStateAttribute(StateInjectionError, AttributeError):
    """An object state lacks the field an ``InjectedState("field")`` parameter needs."""


class StateShapeError(StateInjectionError, ValueError):
    """A ``ToolNode`` given a list of messages runs a tool that needs other state fields."""


class MessagesOnlyState(dict[str, Any]):
    """The state a ``ToolNode`` given a bare list of messages hands its tools:
    ``{messages_key: the list}`` (LangGraph's); other fields cannot be injected."""


def live_state_writes(result: Any, lives: list[Any], state: Any, call_id: Any, name: str,
                      fmt: Any) -> Any:
    """``result``, or a ``Command`` of what a tool ``set`` on the live states it was given
    over the engine's state dict (``lives``; one the caller passed in itself is left
    alone), with the call's ``ToolMessage`` (``fmt(result)`` as its text)."""
    changes: dict[str, Any] = {}
    for live in lives:
        if live is not None and live is not state:
            changes.update(live.changes())
    if not changes or isinstance(result, Command):
        return result
    from threadloom.messages import ToolMessage

    message = ToolMessage(fmt(result), tool_call_id=call_id or "", name=name)
    return Command(update={**changes, "messages": [*changes.get("messages", ()), message]})


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
    "InjectedConfig", "InjectedIdempotencyKey", "InjectedLiveState", "InjectedState",
    "InjectedToolArg", "InjectedToolCallId", "MessagesOnlyState", "MissingStateAttribute",
    "MissingStateKey", "StateInjectionError", "StateShapeError",
    "state_update_of",
]
