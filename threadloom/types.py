"""Value types shared by the engine and the checkpoint codec: markers, routing packets,
retry settings.

Small and import-free on purpose (as Starlette's ``types.py``): definition time, run time
and the codec all use these, and nothing here runs a graph or imports threadloom.
"""

from __future__ import annotations

import random
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

START = "__start__"
"""The virtual node a run enters from."""

END = "__end__"
"""The virtual node a branch goes to when it is finished."""

CONFIG_KEY_NODE_FINISHED = "__pregel_node_finished"
"""A ``configurable`` key: a callable given each node's name as the node finishes (not
when it pauses or fails), in subgraphs too; LangGraph's key of the same name and value."""

ROOT = "__root__"
"""The one channel of a graph whose whole state is a single value (``StateGraph(list)``)."""

RESERVED_NAMES = frozenset({START, END, "__interrupt__", ROOT, "__pregel_tasks"})


@dataclass(frozen=True, slots=True)
class Send:
    """A packet routing ``arg`` to ``node`` as that task's whole input (map-reduce fan-out).

    As LangGraph's ``Send``: a conditional edge may return a list of these; each becomes one
    task in the next super-step, whose node receives ``arg`` instead of the state.

    Args:
        node: the target node's name.
        arg: the input the task receives (any value the codec can store).
    """

    node: str
    arg: Any


@dataclass(frozen=True, slots=True)
class Command:
    """What a node may return to update the state and route in one go, or resume a run.

    As LangGraph's ``Command``.

    Args:
        update: a partial state update (dict), applied like a node's returned dict.
        goto: node name(s) or ``Send`` packets to run next, in addition to static edges.
        resume: the value ``interrupt()`` returns when a paused run is resumed; either one
            value, or a dict ``{interrupt_id: value}`` to answer several interrupts.
        graph: ``Command.PARENT`` to route in the parent graph from inside a subgraph.
    """

    update: Any = None
    goto: str | Send | Sequence[str | Send] = ()
    resume: Any = None
    graph: str | None = None

    PARENT = "__parent__"

    def __class_getitem__(cls, item: Any) -> Any:
        # ``-> Command[Literal["a", "b"]]`` declares where a node may route.
        return types.GenericAlias(cls, item if isinstance(item, tuple) else (item,))

    def __repr__(self) -> str:
        # as LangGraph's: the fields that are set, in its field order
        shown = (("graph", self.graph), ("update", self.update), ("resume", self.resume),
                 ("goto", self.goto))
        return "Command(" + ", ".join(f"{k}={v!r}" for k, v in shown if v) + ")"

    def goto_list(self) -> list[str | Send]:
        """Return ``goto`` as a list."""
        if isinstance(self.goto, str | Send):
            return [self.goto]
        return list(self.goto)


OVERWRITE = "__overwrite__"
"""The key of an ``Overwrite`` in JSON: ``{"__overwrite__": value}``."""


@dataclass(frozen=True, slots=True)
class Overwrite:
    """A write that replaces a reduced key's value instead of going through its reducer.

    As LangGraph's ``Overwrite``: ``{"messages": Overwrite(["b"])}`` sets ``messages`` to
    ``["b"]`` whatever its reducer; the JSON forms ``{"__overwrite__": value}`` and
    ``{"type": "__overwrite__", "value": value}`` count as one too. Two overwrites of one
    key in one super-step are an ``InvalidUpdateError``.

    Args:
        value: the key's new value.
    """

    value: Any
    type: Literal["__overwrite__"] = "__overwrite__"


class Interrupt(NamedTuple):
    """A pause requested by ``interrupt(value)`` inside a node.

    Attributes:
        value: what the node asked the human (any codec-storable value).
        id: a stable id for this interrupt, used to resume it by id.
    """

    value: Any
    id: str


def _default_retry_on(exc: BaseException) -> bool:
    # Programming errors are not worth retrying; everything else is (as LangGraph's default).
    return not isinstance(
        exc,
        ValueError
        | TypeError
        | ArithmeticError
        | ImportError
        | LookupError
        | NameError
        | SyntaxError
        | RuntimeError
        | ReferenceError
        | StopIteration
        | StopAsyncIteration
        | OSError,
    ) or isinstance(exc, ConnectionError | TimeoutError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failing node is retried, as LangGraph's ``RetryPolicy``.

    Args:
        max_attempts: attempts in all, the first included (>= 1).
        initial_interval: seconds to wait before the first retry.
        backoff_factor: multiplier of the interval after each retry.
        max_interval: cap on the interval, in seconds.
        jitter: add a random 0 to 1 second to each interval (as LangGraph).
        retry_on: an exception class, a tuple or list of them, or a predicate
            ``exc -> bool``.
    """

    max_attempts: int = 3
    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    jitter: bool = True
    retry_on: (
        type[BaseException]
        | tuple[type[BaseException], ...]
        | list[type[BaseException]]
        | Callable[[BaseException], bool]
    ) = field(default=_default_retry_on)

    def should_retry(self, exc: BaseException) -> bool:
        """Whether ``exc`` is one this policy retries.

        Raises:
            TypeError: ``retry_on`` is none of the forms it takes.
        """
        rule = self.retry_on
        if isinstance(rule, type | tuple | list):  # a list of classes, as LangGraph allows
            return isinstance(exc, tuple(rule) if isinstance(rule, list) else rule)
        if not callable(rule):
            raise TypeError(
                "retry_on must be an Exception class, a list or tuple of them, or a callable "
                f"exc -> bool; got {rule!r}"
            )
        return bool(rule(exc))

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_interval, self.initial_interval * self.backoff_factor ** (attempt - 1))
        return base + random.uniform(0, 1) if self.jitter else base  # noqa: S311 - as LangGraph


StreamMode = Literal["values", "updates", "messages", "custom", "debug", "checkpoints", "tasks"]
Durability = Literal["sync", "async", "exit"]


class StateUpdate(NamedTuple):
    """One update of ``bulk_update_state`` (as LangGraph's ``StateUpdate``): write
    ``values`` into the thread as if node ``as_node`` had returned them.

    Args:
        values: the update (a dict, a ``Command``, or None).
        as_node: the node it comes from; ``"__input__"`` saves it as a run's input,
            ``"__copy__"`` copies the checkpoint (a list of ``StateUpdate`` then updates
            the copy), None lets a lone update find its node as ``update_state`` does.
        task_id: the id of the task whose result the update becomes (default: the next
            task of ``as_node`` the checkpoint has).
    """

    values: Any
    as_node: str | None = None
    task_id: str | None = None
