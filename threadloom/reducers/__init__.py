"""State reducers: ``reducer(current, update) -> new value``."""

from threadloom.reducers.generic import merge_lists, replace_values
from threadloom.reducers.messages import REMOVE_ALL_MESSAGES, MessagesState, add_messages

__all__ = ["REMOVE_ALL_MESSAGES", "MessagesState", "add_messages", "merge_lists", "replace_values"]
