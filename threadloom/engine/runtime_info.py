"""The value types a node's ``runtime`` argument is made of: ``Runtime`` itself,
``ExecutionInfo``, ``ServerInfo`` and ``RunControl`` (as LangGraph's ``langgraph.runtime``),
and ``coerce_context``, which turns a ``context=`` dict into the graph's ``context_schema``.

Plain data: nothing here runs a graph; ``runtime.py`` fills these in for a running task.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

ContextT = TypeVar("ContextT")


def _no_op_writer(_: Any) -> None:
    return None


def _no_op_heartbeat() -> None:
    return None


@dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """Facts about the running node call, as LangGraph's ``ExecutionInfo``.

    Attributes:
        checkpoint_id: the checkpoint the run continues from ("" for a new thread).
        checkpoint_ns: the task's namespace, ``node:task_id`` (after its parent
            graphs' own, joined by ``|``), as LangGraph's.
        task_id: the task's id.
        thread_id: the thread, or None without one.
        run_id: the config's ``run_id``, or None.
        node_attempt: the attempt number under the node's retry policy (1-based).
        node_first_attempt_time: Unix time (s) the first attempt started.
    """

    checkpoint_id: str
    checkpoint_ns: str
    task_id: str
    thread_id: str | None = None
    run_id: str | None = None
    node_attempt: int = 1
    node_first_attempt_time: float | None = None

    def patch(self, **overrides: Any) -> ExecutionInfo:
        """A copy with the given fields replaced."""
        return replace(self, **overrides)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Who runs the graph when a server does (as LangGraph's ``ServerInfo``): read
    from the config's ``configurable`` ``assistant_id``/``graph_id`` (and
    ``langgraph_auth_user``); None otherwise.

    Attributes:
        assistant_id: the assistant the run belongs to.
        graph_id: the graph's id.
        user: the authenticated user, if any.
    """

    assistant_id: str
    graph_id: str
    user: Any = None


class RunControl:
    """A handle to ask a run to stop cleanly between super-steps (``request_drain``),
    from any thread, as LangGraph's ``RunControl``. One per run."""

    __slots__ = ("_reason",)

    def __init__(self) -> None:
        self._reason: str | None = None

    def request_drain(self, reason: str = "shutdown") -> None:
        """Ask the run to stop before its next super-step."""
        self._reason = reason

    @property
    def drain_requested(self) -> bool:
        """Whether ``request_drain`` was called."""
        return self._reason is not None

    @property
    def drain_reason(self) -> str | None:
        """The reason given to ``request_drain``, or None."""
        return self._reason


@dataclass(frozen=True, slots=True)
class Runtime(Generic[ContextT]):
    """Handed to a node that declares a ``runtime`` parameter (``Runtime[Context]`` in a
    hint), as LangGraph's ``Runtime``; every field has a default, so one can be built
    by hand (``Runtime(context=...)``).

    Attributes:
        context: the ``context=`` object given to ``invoke`` (made an instance of the
            graph's ``context_schema`` when it was a dict).
        store: always None (threadloom has no long-term store; kept for LangGraph code).
        stream_writer: writes to the ``custom`` stream mode.
        heartbeat: a no-op (threadloom has no idle timeouts).
        previous: always None (the functional API's previous return value).
        execution_info: the attempt number and ids of this node call.
        server_info: who runs the graph, when a server does; else None.
        control: the run's ``RunControl``, when it was given one.
        config: the run config (``configurable`` holds ``thread_id`` etc.).
        node: the running node's name.
        step: the current super-step.
        remaining_steps: super-steps left before ``recursion_limit`` stops the run
            (as LangGraph's ``RemainingSteps``; counted per invocation).
    """

    context: ContextT = field(default=None)  # type: ignore[assignment]
    store: Any = None
    stream_writer: Callable[[Any], None] = _no_op_writer
    heartbeat: Callable[[], None] = _no_op_heartbeat
    previous: Any = None
    execution_info: ExecutionInfo | None = None
    server_info: ServerInfo | None = None
    control: RunControl | None = None
    config: dict[str, Any] = field(default_factory=dict, kw_only=True)
    node: str = field(default="", kw_only=True)
    step: int = field(default=0, kw_only=True)
    remaining_steps: int = field(default=0, kw_only=True)

    def merge(self, other: Runtime[ContextT]) -> Runtime[ContextT]:
        """This runtime with what ``other`` sets (a truthy value, a writer that is not
        the no-op one) taking its place, as LangGraph's ``merge``."""
        return replace(
            self,
            context=other.context or self.context,
            store=other.store or self.store,
            stream_writer=self.stream_writer
            if other.stream_writer is _no_op_writer
            else other.stream_writer,
            heartbeat=self.heartbeat if other.heartbeat is _no_op_heartbeat else other.heartbeat,
            previous=self.previous if other.previous is None else other.previous,
            execution_info=other.execution_info or self.execution_info,
            server_info=other.server_info or self.server_info,
            control=other.control or self.control,
        )

    def override(self, **overrides: Any) -> Runtime[ContextT]:
        """A copy with the given fields replaced."""
        return replace(self, **overrides)

    def patch_execution_info(self, **overrides: Any) -> Runtime[ContextT]:
        """A copy whose ``execution_info`` has the given fields replaced.

        Raises:
            RuntimeError: this runtime has no ``execution_info`` yet.
        """
        if self.execution_info is None:
            raise RuntimeError("Cannot patch execution_info before it has been set")
        return replace(self, execution_info=self.execution_info.patch(**overrides))

    @property
    def drain_requested(self) -> bool:
        """Whether the run's ``control`` asked it to stop."""
        return self.control is not None and self.control.drain_requested

    @property
    def drain_reason(self) -> str | None:
        """The reason the run was asked to stop, or None."""
        return None if self.control is None else self.control.drain_reason


DEFAULT_RUNTIME: Runtime[Any] = Runtime()
"""A runtime with every field at its default (as LangGraph's ``DEFAULT_RUNTIME``)."""


def server_info(config: Mapping[str, Any]) -> ServerInfo | None:
    """The ``ServerInfo`` a config describes, or None when it names no assistant/graph."""
    conf = config.get("configurable") or {}
    assistant, graph = conf.get("assistant_id"), conf.get("graph_id")
    if assistant is None and graph is None:
        return None
    return ServerInfo(str(assistant or ""), str(graph or ""), conf.get("langgraph_auth_user"))


def coerce_context(schema: Any, context: Any) -> Any:
    """``context`` as an instance of ``schema`` when it is a dict and ``schema`` a
    dataclass or pydantic model (a TypedDict, or no schema, takes the dict as it is),
    as LangGraph does at the start of a run.

    Raises:
        TypeError: a dataclass schema does not take the dict's keys.
        pydantic.ValidationError: a pydantic schema refuses the values.
    """
    if schema is None or not isinstance(context, dict) or not isinstance(schema, type):
        return context
    if dataclasses.is_dataclass(schema):
        return schema(**context)
    validate = getattr(schema, "model_validate", None)
    if validate is not None and not typing.is_typeddict(schema):
        return validate(context)
    return context
