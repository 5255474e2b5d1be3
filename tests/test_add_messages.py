"""add_messages (H01, H02), its laws as hypothesis properties, and the generic reducers."""

from __future__ import annotations

import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadloom.messages import (
    REMOVE_ALL_MESSAGES,
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from threadloom.reducers import MessagesState, add_messages, merge_lists, replace_values

# --- H01 -----------------------------------------------------------------------------------


def h01_update() -> list[BaseMessage]:
    return [AIMessage("draft", id="a1"), AIMessage("final", id="a1"), HumanMessage("no id given")]


def test_h01_duplicates_in_one_update_collapse_and_missing_id_is_assigned() -> None:
    left = [HumanMessage("hi", id="h1")]
    right = h01_update()
    result = add_messages(left, right)
    assert [(m.id, m.content) for m in result[:2]] == [("h1", "hi"), ("a1", "final")]
    assert len(result) == 3
    new_id = result[2].id
    assert isinstance(new_id, str) and new_id and new_id not in ("h1", "a1")
    assert right[2].id == new_id  # assigned on the message object: the stored id is stable
    # Re-applying the same update adds nothing and changes nothing.
    again = add_messages(result, right)
    assert [(m.id, m.content) for m in again] == [(m.id, m.content) for m in result]
    assert left == [HumanMessage("hi", id="h1")]  # left not mutated


def test_h01_graph_input_without_id_gets_one() -> None:
    result = add_messages([], [("user", "hello"), {"role": "user", "content": "x"}])
    assert all(m.id for m in result) and result[0].id != result[1].id


# --- H02 -----------------------------------------------------------------------------------


def test_h02_remove_existing() -> None:
    result = add_messages([HumanMessage(id="1"), AIMessage(id="2")], [RemoveMessage("2")])
    assert result == [HumanMessage(id="1")]


def test_h02_remove_unknown_id_is_a_clear_error_and_state_unchanged() -> None:
    left = [HumanMessage(id="1")]
    with pytest.raises(ValueError, match="'9'"):
        add_messages(left, [AIMessage("new", id="2"), RemoveMessage("9")])
    assert left == [HumanMessage(id="1")]


def test_h02_later_message_cancels_removal() -> None:
    result = add_messages(
        [HumanMessage(id="1"), AIMessage("old", id="2")],
        [RemoveMessage("2"), AIMessage("new", id="2")],
    )
    assert result == [HumanMessage(id="1"), AIMessage("new", id="2")]


def test_h02_remove_after_add_in_same_update_removes() -> None:
    result = add_messages([HumanMessage(id="1")], [AIMessage("x", id="2"), RemoveMessage("2")])
    assert result == [HumanMessage(id="1")]


def test_remove_message_is_detectable_and_never_stored() -> None:
    marker = RemoveMessage(id="1")
    assert isinstance(marker, RemoveMessage) and isinstance(marker, BaseMessage)
    result = add_messages([HumanMessage(id="1"), HumanMessage(id="2")], [marker])
    assert not any(isinstance(m, RemoveMessage) for m in result)


def test_remove_all_drops_history_and_earlier_items() -> None:
    left = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
    result = add_messages(
        left, [HumanMessage("lost", id="3"), RemoveMessage(id=REMOVE_ALL_MESSAGES), "kept"]
    )
    assert [m.content for m in result] == ["kept"] and result[0].id
    assert add_messages(left, RemoveMessage(id=REMOVE_ALL_MESSAGES)) == []


# --- other behaviour -----------------------------------------------------------------------


def test_replace_in_place_keeps_position_and_identity_of_others() -> None:
    first, second, third = (
        HumanMessage("a", id="1"),
        AIMessage("b", id="2"),
        HumanMessage("c", id="3"),
    )
    left = [first, second, third]
    result = add_messages(left, AIMessage("B", id="2"))
    assert [m.content for m in result] == ["a", "B", "c"]
    assert result[0] is first and result[2] is third
    assert result is not left and left[1] is second


def test_append_returns_new_list_starting_with_same_objects() -> None:
    left = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
    result = add_messages(left, [ToolMessage("r", tool_call_id="c")])
    assert result is not left and len(left) == 2
    assert all(x is y for x, y in zip(result, left, strict=False)) and len(result) == 3


def test_none_left_coercion_and_bad_item() -> None:
    assert [m.content for m in add_messages(None, "hi")] == ["hi"]
    assert [m.type for m in add_messages([("user", "a")], [("ai", "b")])] == ["human", "ai"]
    with pytest.raises(TypeError):
        add_messages([], [object()])


def test_messages_state_declares_the_reducer() -> None:
    hints = typing.get_type_hints(MessagesState, include_extras=True)
    assert hints["messages"].__metadata__ == (add_messages,)


# --- properties ----------------------------------------------------------------------------

# Shared CI machines can be slow to start generating; the laws, not timing, are under test.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
ids = st.sampled_from(["a", "b", "c", "d", "e"])
maybe_id = st.one_of(st.none(), ids)
texts = st.text(max_size=3)


@st.composite
def messages(draw: st.DrawFn, id_strategy: st.SearchStrategy[str | None] = maybe_id) -> BaseMessage:
    cls = draw(st.sampled_from([HumanMessage, AIMessage]))
    return cls(draw(texts), id=draw(id_strategy))


def unique_history() -> st.SearchStrategy[list[BaseMessage]]:
    return st.lists(messages(ids), max_size=5, unique_by=lambda m: m.id)


@PROPERTY
@given(left=unique_history(), right=st.lists(messages(), max_size=6))
def test_ids_unique_and_all_set(left: list[BaseMessage], right: list[BaseMessage]) -> None:
    result = add_messages(left, right)
    result_ids = [m.id for m in result]
    assert all(result_ids) and len(set(result_ids)) == len(result_ids)


@PROPERTY
@given(left=unique_history(), right=st.lists(messages(), max_size=6))
def test_order_kept_and_replace_keeps_position(
    left: list[BaseMessage], right: list[BaseMessage]
) -> None:
    snapshot = list(left)
    result = add_messages(left, right)
    left_ids = [m.id for m in snapshot]
    # left's ids come first, in the same order and positions
    assert [m.id for m in result[: len(left_ids)]] == left_ids
    last_by_id = {m.id: m for m in right}
    for position, old in enumerate(snapshot):
        expected = last_by_id.get(old.id, old)
        assert result[position] is expected
    # new ids follow in the order they first appear in right
    new_ids = list(dict.fromkeys(m.id for m in right if m.id not in set(left_ids)))
    assert [m.id for m in result[len(left_ids) :]] == new_ids
    assert left == snapshot


@PROPERTY
@given(left=unique_history(), right=st.lists(messages(), max_size=6))
def test_reapplying_the_same_update_adds_nothing(
    left: list[BaseMessage], right: list[BaseMessage]
) -> None:
    once = add_messages(left, right)
    twice = add_messages(once, right)
    assert [(m.id, m.content, m.type) for m in twice] == [(m.id, m.content, m.type) for m in once]


@PROPERTY
@given(left=unique_history(), data=st.data())
def test_removing_present_ids_removes_exactly_them(
    left: list[BaseMessage], data: st.DataObject
) -> None:
    present = [m.id for m in left]
    doomed = data.draw(st.lists(st.sampled_from(present), unique=True) if present else st.just([]))
    result = add_messages(left, [RemoveMessage(id=i) for i in doomed])
    assert [m.id for m in result] == [i for i in present if i not in doomed]


# --- generic reducers ----------------------------------------------------------------------


def test_merge_lists() -> None:
    current = [1, 2]
    assert merge_lists(current, [3, 4]) == [1, 2, 3, 4]
    assert merge_lists(current, 3) == [1, 2, 3]
    assert merge_lists(current, (3, 4)) == [1, 2, (3, 4)]
    assert merge_lists(None, [1]) == [1]
    assert merge_lists(None, "x") == ["x"]
    assert merge_lists("a", ["b"]) == ["a", "b"]
    assert current == [1, 2]  # not mutated


def test_replace_values() -> None:
    assert replace_values([1], [2]) == [2]
    assert replace_values("old", None) is None
