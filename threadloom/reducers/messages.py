"""The ``add_messages`` reducer and ``MessagesState`` (LangGraph's, with its known gaps fixed)."""

from __future__ import annotations

from typing import Annotated, Any

from typing_extensions import TypedDict

from threadloom.messages import (
    REMOVE_ALL_MESSAGES,
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from threadloom.messages.ids import uuid4_str
from threadloom.messages.openai_format import openai_formatted
from threadloom.reducers.appends import LONG, note_append

_BUILTIN_TYPES = frozenset(
    {AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, SystemMessage, ToolMessage}
)
_APPENDABLE = _BUILTIN_TYPES - {RemoveMessage}


_new_id = uuid4_str  # a fresh ``str(uuid4())``-shaped id


def _set_id(message: BaseMessage, mid: str) -> None:
    """``message.id = mid``. For the built-in classes (no assignment validation, ``id`` a
    plain field) that is what pydantic's ``__setattr__`` does, done here directly."""
    if type(message) in _BUILTIN_TYPES:
        message.__dict__["id"] = mid
        message.__pydantic_fields_set__.add("id")
    else:
        message.id = mid


def _ensure_ids(messages: list[BaseMessage]) -> bool:
    """Give every message without an id a new one; whether any is a ``RemoveMessage``."""
    removes = False
    for message in messages:
        if not message.id:
            # Set on the object itself: the stored value keeps this id for good, and
            # applying the same update again finds it instead of appending a copy.
            _set_id(message, _new_id())
        if type(message) is RemoveMessage or (
                type(message) not in _BUILTIN_TYPES and isinstance(message, RemoveMessage)):
            removes = True
    return removes


# The list add_messages returned last is usually the next call's ``left`` (the channel's
# value): keep its id index so an append costs O(update), not O(history). Entries hold
# the list itself, so an id() reused after garbage collection can never match. A call
# takes its ``left``'s entry out (pop: one caller owns the index, even across threads)
# and updates that index for its result instead of copying it.
_INDEX_CACHE: dict[int, tuple[list[BaseMessage], dict[str, int]]] = {}
_INDEX_CACHE_SIZE = 64


def _remember(result: list[BaseMessage], index: dict[str, int]) -> None:
    if len(_INDEX_CACHE) >= _INDEX_CACHE_SIZE:
        try:  # drop the oldest entry; another thread may be changing the cache meanwhile
            _INDEX_CACHE.pop(next(iter(_INDEX_CACHE)), None)
        except (RuntimeError, StopIteration):
            pass
    _INDEX_CACHE[id(result)] = (result, index)


def _index_stored(left: Any) -> tuple[list[BaseMessage], dict[str, int]]:
    """Coerce ``left`` (only when needed) and map id -> position in one pass."""
    cached = _INDEX_CACHE.pop(id(left), None)
    if cached is not None and cached[0] is left and len(cached[1]) == len(left):
        return left, cached[1]
    stored = left if type(left) is list else convert_to_messages(left)
    index: dict[str, int] = {}
    for i, message in enumerate(stored):
        if type(message) not in _BUILTIN_TYPES and not isinstance(message, BaseMessage):
            return _index_stored(convert_to_messages(stored))
        mid = message.id
        if not mid:
            mid = _new_id()
            _set_id(message, mid)
        index[mid] = i
    return stored, index


def add_messages(left: Any = None, right: Any = None, *, format: str | None = None) -> Any:
    """Merge a message update into the stored list, as LangGraph's ``add_messages``.

    ``add_messages(format="langchain-openai")`` (no lists) gives this reducer with its
    result's content in OpenAI's format (``messages.openai_format``), as LangGraph's.

    Both sides are coerced with ``convert_to_messages`` (messages, strings, ``(role,
    content)`` tuples, role dicts; a single value counts as a one-item list). Then, in
    the order of ``right``:

    - a message without an id gets a new uuid4 id, set on the message object;
    - a message whose id is already present (in ``left`` or earlier in ``right``)
      replaces it in place, so duplicates in one update collapse (last wins, first
      position);
    - ``RemoveMessage(id)`` deletes that message; a later message with the same id in the
      same update cancels the removal;
    - ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` drops ``left`` and everything before it in
      ``right``.

    A ``RemoveMessage`` is never stored.

    Args:
        left: the stored messages (``None`` counts as empty); never mutated.
        right: the update.

    Returns:
        A new list. Unchanged messages of ``left`` are the same objects, in the same order,
        so an append-only update gives ``left + new``.

    Raises:
        ValueError: a ``RemoveMessage`` names an id that is not present (the message
            names the id; nothing is changed).
        TypeError: an item cannot be converted to a message.
        ValueError: a ``format`` other than ``"langchain-openai"``.
    """
    if format is not None or (left is None and right is None):
        return _formatting(left, right, format)
    if type(left) is list and type(right) is list and len(right) == 1 and (
            type(right[0]) in _APPENDABLE):
        cached = _INDEX_CACHE.pop(id(left), None)
        if cached is not None and cached[0] is left and len(cached[1]) == len(left):
            return _add_one(left, right[0], cached[1])  # the usual write, on a known list
    update = convert_to_messages(right)
    removes = _ensure_ids(update)
    if removes:
        for i in range(len(update) - 1, -1, -1):
            item = update[i]
            if isinstance(item, RemoveMessage) and item.id == REMOVE_ALL_MESSAGES:
                return add_messages([], update[i + 1 :])
    stored, index = _index_stored(left)
    if len(update) == 1 and not removes:
        return _add_one(stored, update[0], index)
    if not removes and _is_plain_append(update, index):
        result = stored + update
        base = len(stored)
        if base >= LONG:
            note_append(result, stored)
        for offset, message in enumerate(update):
            index[message.id] = base + offset  # type: ignore[index]
        _remember(result, index)
        return result
    return _merge(stored, update, index)


def _formatting(left: Any, right: Any, format: str | None) -> Any:
    if format not in (None, "langchain-openai"):
        raise ValueError(f"Unrecognized format={format!r}. Expected one of "
                         "'langchain-openai', None.")
    if left is None and right is None:
        def reducer(left: Any, right: Any) -> list[BaseMessage]:
            return _formatting(left, right, format)  # type: ignore[no-any-return]

        reducer.__name__ = "add_messages"  # the engine's add_messages checks read it
        return reducer
    merged = add_messages(left, right)
    return openai_formatted(merged) if format else merged


def _add_one(stored: list[BaseMessage], message: BaseMessage,
             index: dict[Any, int]) -> list[BaseMessage]:
    """``add_messages(stored, [message])`` given ``stored``'s id index (taken over)."""
    mid = message.id
    if not mid:
        mid = _new_id()
        _set_id(message, mid)
    if mid in index:
        return _merge(stored, [message], index)
    index[mid] = len(stored)
    result = [*stored, message]
    if len(stored) >= LONG:
        note_append(result, stored)
    _remember(result, index)
    return result


def _is_plain_append(update: list[BaseMessage], index: dict[Any, int]) -> bool:
    seen: set[Any] = set()
    for message in update:
        if isinstance(message, RemoveMessage) or message.id in index or message.id in seen:
            return False
        seen.add(message.id)
    return True


def _merge(
    stored: list[BaseMessage], update: list[BaseMessage], index: dict[Any, int]
) -> list[BaseMessage]:
    merged = list(stored)
    to_remove: set[str] = set()
    for message in update:
        position = index.get(message.id)
        if isinstance(message, RemoveMessage):
            if position is None:
                raise ValueError(
                    "Attempting to delete a message with an ID that doesn't exist "
                    f"({message.id!r}): no message with that id in the state or earlier "
                    "in this update"
                )
            to_remove.add(message.id)
        elif position is None:
            index[message.id] = len(merged)
            merged.append(message)
        else:
            to_remove.discard(message.id)  # type: ignore[arg-type]
            merged[position] = message
    if to_remove:
        merged = [m for m in merged if m.id not in to_remove]
    return merged


class MessagesState(TypedDict):
    """A state with one ``messages`` field reduced by ``add_messages`` (as LangGraph's)."""

    messages: Annotated[list[AnyMessage], add_messages]


__all__ = ["REMOVE_ALL_MESSAGES", "MessagesState", "add_messages"]
