"""The codec's direct message writer gives exactly the bytes of the ``model_dump`` path."""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint import serde
from threadloom.checkpoint.serde import TAG, Codec
from threadloom.checkpoint.serde_messages import message_tree
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from threadloom.messages.build import construct_unchecked
from threadloom.messages.types import BaseMessage, RemoveMessage

CLASSES = [AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, BaseMessage]


def _general(message: Any) -> bytes:
    """The bytes of the path the codec took before the direct writer (``model_dump``)."""
    codec = Codec()
    codec.register_from_annotation(dt.date)
    with patch.object(serde, "message_tree", lambda m: None), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return codec.dumps([message])


def _same(message: Any) -> bool:
    """Assert both paths agree; return whether the direct writer took the message."""
    codec = Codec()
    codec.register_from_annotation(dt.date)
    taken = message_tree(message) is not None
    if taken:  # the general path gives no warning either: nothing pydantic would flag
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            message.model_dump(exclude_defaults=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the general path may warn about odd values
        assert codec.dumps([message]) == _general(message)
    return taken


EVERYDAY = [
    HumanMessage("hi", id="1"),
    HumanMessage("", id=None),
    SystemMessage("be brief"),
    AIMessage("", id="m", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c"}]),
    AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c", "type": "tool_call"}],
              usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
              response_metadata={"finish_reason": "tool_calls", "model_name": "m"}),
    AIMessage("done", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3,
                                      "input_token_details": {"cache_read": 1}}),
    AIMessage([{"type": "text", "text": "a"}], reasoning_content="r", refusal=None),
    AIMessage("x", additional_kwargs={"a": [1, 2.5, None, True, {"b": "é\u2028"}]}),
    ToolMessage("1", tool_call_id="c", name="bump", id="t"),
    ToolMessage("boom", tool_call_id="c", status="error", artifact={"n": [1, 2]}),
    ToolMessage("ok", tool_call_id="c", artifact=0),
    AIMessageChunk("par", id="k"),
]


@pytest.mark.parametrize("message", EVERYDAY, ids=lambda m: type(m).__name__)
def test_everyday_messages_take_the_direct_writer_with_the_same_bytes(message: Any) -> None:
    assert _same(message)


ODD = [
    AIMessage("x", extra_field=1),  # an extra field
    AIMessage("x", additional_kwargs={"when": dt.date(2026, 1, 1)}),
    AIMessage("x", additional_kwargs={TAG: 1}),
    AIMessage("x", response_metadata={"t": (1, 2)}),
    AIMessage("x", additional_kwargs={"f": float("nan")}),
    ToolMessage("ok", tool_call_id="c", artifact={1: "a"}),
    ToolMessage("ok", tool_call_id="c", artifact=b"raw"),
    AIMessage("", invalid_tool_calls=[{"name": "f", "args": "{", "id": "c", "error": "bad"}]),
    AIMessageChunk("", tool_call_chunks=[{"name": "f", "args": "{", "id": "c", "index": 0}]),
    HumanMessage("\ud800 lone surrogate"),
    construct_unchecked(AIMessage, content="x", tool_calls=({"name": "f"},)),
    construct_unchecked(AIMessage, content="x", tool_calls=[{"name": "f", "zz": 1}]),
    construct_unchecked(AIMessage, content="x", tool_calls=[{"name": 1, "args": {}}]),
    construct_unchecked(AIMessage, content="x", usage_metadata={"input_tokens": True}),
    construct_unchecked(AIMessage, content="x", usage_metadata={"input_tokens": 1.0}),
    construct_unchecked(AIMessage, content="x", usage_metadata={"other": 1}),
    construct_unchecked(AIMessage, content=5, id=7),
    construct_unchecked(ToolMessage, content="x", tool_call_id="c", status="bogus"),
    construct_unchecked(HumanMessage, content=["not a dict"]),
    RemoveMessage("gone"),
]


@pytest.mark.parametrize("message", ODD, ids=lambda m: type(m).__name__)
def test_other_shapes_take_the_general_path_or_agree(message: Any) -> None:
    _same(message)


def test_the_default_type_is_written_last_and_a_changed_one_in_place() -> None:
    base = BaseMessage("x", type="custom")
    assert _same(base)
    assert list(message_tree(base) or {}) == ["content", "type"]
    assert list(message_tree(AIMessage("x", id="i")) or {}) == ["content", "id", "type"]


def _trees(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(st.text(max_size=4), st.just(TAG)), inner, max_size=3),
        ),
        max_leaves=8,
    )


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                      st.text(max_size=5))
odd_leaf = st.one_of(json_leaf, st.floats(), st.dates(), st.tuples(st.integers()),
                     st.integers(min_value=2**64))
# mostly plain JSON (the direct writer's shapes), sometimes anything the codec takes
plain_tree = st.one_of(_trees(json_leaf), _trees(json_leaf), _trees(odd_leaf))
call = st.dictionaries(
    st.sampled_from(["name", "args", "id", "type", "other"]),
    st.one_of(st.text(max_size=3), st.just("tool_call"), plain_tree),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    cls=st.sampled_from(CLASSES),
    content=st.one_of(st.text(max_size=5), st.lists(plain_tree, max_size=2)),
    mid=st.one_of(st.none(), st.text(max_size=3), st.integers()),
    kwargs=plain_tree,
    calls=st.lists(call, max_size=2),
    usage=st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["input_tokens", "total_tokens", "input_token_details", "x"]),
        st.one_of(st.integers(), st.booleans(), st.dictionaries(st.text(max_size=2),
                                                                st.integers(), max_size=2)),
        max_size=3)),
    artifact=plain_tree,
)
def test_any_field_values_give_the_same_bytes(
    cls: Any, content: Any, mid: Any, kwargs: Any, calls: Any, usage: Any, artifact: Any
) -> None:
    values: dict[str, Any] = {"content": content, "id": mid, "additional_kwargs": kwargs}
    if issubclass(cls, AIMessage):
        values.update(tool_calls=calls, usage_metadata=usage)
    if cls is ToolMessage:
        values.update(tool_call_id="c", artifact=artifact)
    _same(construct_unchecked(cls, **values))
