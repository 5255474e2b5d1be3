"""What a node's return value (or the run's input) becomes: ``(key, value)`` writes.

A dict (or any mapping) is an update; a ``Command`` carries an update and where to go
next; a list of those is taken in order; a pydantic model or dataclass is read as its
fields. Keys are checked against the state schema here, once per write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from threadloom.engine.schema import update_from_object
from threadloom.errors import InvalidUpdateError, ParentCommand
from threadloom.types import ROOT, Command, Send

if TYPE_CHECKING:
    from threadloom.engine.compiled import CompiledGraph

__all__ = ["ParentCommand", "add_update", "writes_of"]


@overload
def writes_of(
    graph: CompiledGraph, node: str, result: Any, step: int, *, input_mode: Literal[False] = ...
) -> tuple[list[tuple[str, Any]], list[str | Send]]: ...
@overload
def writes_of(
    graph: CompiledGraph, node: str, result: Any, step: int, *, input_mode: Literal[True]
) -> list[tuple[str, Any]]: ...
def writes_of(
    graph: CompiledGraph, node: str, result: Any, step: int, *, input_mode: bool = False
) -> tuple[list[tuple[str, Any]], list[str | Send]] | list[tuple[str, Any]]:
    """Turn a node's return value (or the run's input) into ``(key, value)`` writes.

    Returns ``(writes, goto)`` for a node, or just the writes with ``input_mode``.

    Raises:
        InvalidUpdateError: for a return value of the wrong kind.
    """
    writes: list[tuple[str, Any]] = []
    goto: list[str | Send] = []
    if graph.root_state:
        _collect_root(graph, node, result, step, writes, goto)
    else:
        _collect(graph, node, result, step, writes, goto, input_mode)
    if input_mode:
        return writes
    return writes, goto


def _collect(
    graph: CompiledGraph,
    node: str,
    result: Any,
    step: int,
    writes: list[tuple[str, Any]],
    goto: list[str | Send],
    input_mode: bool,
) -> None:
    if result is None:
        return
    if type(result) is dict or isinstance(result, Mapping):
        add_update(graph, node, result.items(), step, writes, input_mode)
    elif isinstance(result, Command):
        if result.graph == Command.PARENT:
            raise ParentCommand(result)
        if result.update is not None:
            update = result.update
            items = (
                update.items()
                if isinstance(update, Mapping)
                else (update if isinstance(update, list | tuple) else None)
            )
            if items is None:
                obj = update_from_object(update)
                if obj is None:
                    raise _bad_return(node, update, step, "Command.update")
                items = obj.items()
            add_update(graph, node, items, step, writes, input_mode)
        goto.extend(result.goto_list())
    elif (
        isinstance(result, list | tuple)
        and not input_mode
        and all(isinstance(r, Mapping | Command) for r in result)
    ):
        for item in result:
            _collect(graph, node, item, step, writes, goto, input_mode)
    else:
        obj = update_from_object(result)
        if obj is None:
            raise _bad_return(node, result, step, "input" if input_mode else "return value")
        add_update(graph, node, obj.items(), step, writes, input_mode)


def _collect_root(
    graph: CompiledGraph,
    node: str,
    result: Any,
    step: int,
    writes: list[tuple[str, Any]],
    goto: list[str | Send],
) -> None:
    """``_collect`` for a root-channel graph (``StateGraph(list)``): the value returned is
    the write, as LangGraph; a ``Command``'s update is one too, and a list holding a
    ``Command`` is taken item by item."""
    if result is None:
        return
    if isinstance(result, Command):
        if result.graph == Command.PARENT:
            raise ParentCommand(result)
        update = result.update
        if isinstance(update, Mapping):  # as LangGraph: keyed updates, of __root__ only
            add_update(graph, node, update.items(), step, writes, False)
        elif update is not None:
            add_update(graph, node, ((ROOT, update),), step, writes, False)
        goto.extend(result.goto_list())
    elif isinstance(result, list | tuple) and any(isinstance(r, Command) for r in result):
        for item in result:
            _collect_root(graph, node, item, step, writes, goto)
    else:
        add_update(graph, node, ((ROOT, result),), step, writes, False)


def _bad_return(node: str, value: Any, step: int, what: str) -> InvalidUpdateError:
    who = "the run's input" if what == "input" else f"node {node!r}"
    return InvalidUpdateError(
        f"{who} gave {type(value).__name__} {_short(value)} as its {what} at super-step "
        f"{step}; expected a dict of state updates, a Command or None",
        nodes=(node,),
        step=step,
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def add_update(
    graph: CompiledGraph,
    node: str,
    items: Any,
    step: int,
    writes: list[tuple[str, Any]],
    input_mode: bool,
) -> None:
    """Append ``items`` (``(key, value)`` pairs of one update) to ``writes``. As LangGraph,
    a key the schema lacks is dropped, and the run's input keeps only input keys.

    Raises:
        InvalidUpdateError: a ``RemoveMessage`` for a key without ``add_messages`` (the
            message names the node, key and step).
    """
    specs = graph.specs
    input_keys = graph.input_keys
    unchecked = graph.message_keys
    for key, value in items:
        spec = specs.get(key)
        if spec is None:  # as LangGraph: a key the state lacks is dropped (input, node
            continue      # return or update_state alike)
        if input_mode and key not in input_keys:
            continue
        if key not in unchecked and type(value) in (list, tuple):
            _refuse_remove_markers(key, value, node, step)
        writes.append((key, value))


def _refuse_remove_markers(key: str, value: Any, node: str, step: int) -> None:
    for item in value:
        if getattr(item, "type", None) == "remove":
            raise InvalidUpdateError(
                f"node {node!r} wrote a RemoveMessage to state key {key!r} at super-step "
                f"{step}, but RemoveMessage needs the add_messages reducer: annotate the key "
                f"as Annotated[list[AnyMessage], add_messages]",
                field=key,
                nodes=(node,),
                step=step,
            )
