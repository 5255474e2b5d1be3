"""LangGraph's stateful channel objects (``BinaryOperatorAggregate``, ``UntrackedValue``):
built, updated, read and checkpointed by hand as LangGraph's, and usable as reducer
annotations in a state schema."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadloom import InMemoryCheckpointer, StateGraph
from threadloom.engine.channel_objects import BinaryOperatorAggregate
from threadloom.engine.channels import MISSING, UntrackedValue
from threadloom.errors import EmptyChannelError, InvalidUpdateError
from threadloom.types import START, Overwrite


def test_binary_operator_aggregate_by_hand() -> None:
    channel = BinaryOperatorAggregate(int, operator.add).from_checkpoint(MISSING)
    assert channel.ValueType is int and channel.UpdateType is int
    assert channel.get() == 0
    assert channel.update([1, 2, 3]) and channel.get() == 6
    assert channel.update([]) is False
    restored = BinaryOperatorAggregate(int, operator.add).from_checkpoint(channel.checkpoint())
    assert restored.get() == 6
    restored.update([Overwrite(1), 5])
    assert restored.get() == 1  # an Overwrite replaces; later plain writes of the step drop
    with pytest.raises(InvalidUpdateError):
        restored.update([Overwrite(1), Overwrite(2)])


def test_a_type_without_an_empty_value_starts_empty() -> None:
    class Needs:
        def __init__(self, x: int) -> None:
            self.x = x

    channel = BinaryOperatorAggregate(Needs, lambda a, b: b).from_checkpoint(MISSING)
    with pytest.raises(EmptyChannelError):
        channel.get()
    assert not channel.is_available() and channel.checkpoint() is MISSING


def test_untracked_value_by_hand() -> None:
    channel = UntrackedValue(dict).from_checkpoint(MISSING)
    assert channel.ValueType is dict
    with pytest.raises(EmptyChannelError):
        channel.get()
    channel.update([{"a": 1}])
    assert channel.get() == {"a": 1} and channel.checkpoint() is MISSING
    with pytest.raises(InvalidUpdateError):
        channel.update([{}, {}])
    relaxed = UntrackedValue(dict, guard=False)
    relaxed.update([{"a": 1}, {"b": 2}])
    assert relaxed.get() == {"b": 2}
    with pytest.raises(EmptyChannelError):
        UntrackedValue(dict).from_checkpoint(channel.checkpoint()).get()


def test_as_a_reducer_annotation_in_a_state_schema() -> None:
    class S(TypedDict):
        total: Annotated[int, BinaryOperatorAggregate(int, operator.add)]

    b = StateGraph(S)
    b.add_node("a", lambda s: {"total": 2})
    b.add_node("b", lambda s: {"total": 3})
    b.add_edge(START, "a")
    b.add_edge(START, "b")
    app = b.compile(checkpointer=InMemoryCheckpointer())
    assert app.invoke({"total": 1}, thread_id="t") == {"total": 6}
    assert isinstance(app.channels["total"], BinaryOperatorAggregate)  # as LangGraph's
