"""How deep a stored value may nest, independent of how deep the caller's stack is.

The codec walks values recursively, and Python's ``json`` counts its nesting against the
recursion limit, so without help the deepest value that can be written or read depends
on how many frames the caller already uses (a value a script stores could not be stored,
or read back, from inside a deep call chain). ``MAX_DEPTH`` fixes the bound: the codec
writes values nested up to ``MAX_DEPTH`` levels from any stack, refuses deeper ones with
``SerializationError`` at write time, and reads back everything it wrote; a forged blob
nested deeper is refused too, never a bare ``RecursionError``.

Only the slow path (after a ``RecursionError``) pays for this: ``room`` raises the
recursion limit for the duration of one walk (shared between threads, restored when the
last walk ends) and ``depth`` measures a tree without recursing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MAX_DEPTH = 500
"""Nesting levels (lists, dicts, envelopes) a stored value may have."""

_lock = threading.Lock()
_active = 0
_saved = 0


def _frames_in_use() -> int:
    frame: Any = sys._getframe()
    n = 0
    while frame is not None:
        n += 1
        frame = frame.f_back
    return n


@contextmanager
def room(frames: int) -> Iterator[None]:
    """Run the block with at least ``frames`` more frames allowed than are in use now.

    The limit only grows while any thread is inside ``room``; the last one out restores
    the limit found by the first one in.
    """
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getrecursionlimit()
        _active += 1
        sys.setrecursionlimit(max(sys.getrecursionlimit(), _frames_in_use() + frames))
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setrecursionlimit(_saved)


def depth(tree: Any) -> int:
    """Nesting depth of a JSON tree (a scalar: 0, ``[]``: 1, ``[[1]]``: 2), iteratively."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(tree, 0)]
    while stack:
        node, level = stack.pop()
        t = type(node)
        if t is list or t is dict:
            level += 1
            deepest = max(deepest, level)
            stack.extend((x, level) for x in (node if t is list else node.values()))
    return deepest
