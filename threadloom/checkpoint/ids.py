"""Checkpoint ids: 32 hex characters whose order is creation order, and the ``ts`` an
id holds (``checkpoint_ts``); re-exported by ``base``."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime

__all__ = ["checkpoint_ts", "new_checkpoint_id", "new_checkpoint_id_ts"]

_id_lock = threading.Lock()
_last_id = [0]
_process_tag = [os.urandom(8).hex()]
os.register_at_fork(after_in_child=lambda: _process_tag.__setitem__(0, os.urandom(8).hex()))


def new_checkpoint_id() -> str:
    """A new checkpoint id: 32 hex chars whose order is creation order in this process.

    The first 16 are the time in nanoseconds (strictly increasing, even within one
    clock tick); the last 16 are random per process (drawn again in a forked child), so
    ids from different processes never clash.
    """
    return f"{_next_ns():016x}{_process_tag[0]}"


def _next_ns() -> int:
    now = time.time_ns()
    with _id_lock:
        if now <= _last_id[0]:
            now = _last_id[0] + 1
        _last_id[0] = now
    return now


def new_checkpoint_id_ts() -> tuple[str, str]:
    """A new checkpoint id (``new_checkpoint_id``) and its ``ts`` (``checkpoint_ts``).

    Called on every save, so it formats both with the cheapest equal forms: the hex time
    unpadded once it has 16 digits (from 2006 on), and the microseconds as a plain int
    once they have 6 digits, the current second's ISO prefix and bounds remembered.
    """
    now = time.time_ns()
    with _id_lock:
        if now <= _last_id[0]:
            now = _last_id[0] + 1
        _last_id[0] = now
    cid = f"{now:x}{_process_tag[0]}" if now >= _HEX16 else f"{now:016x}{_process_tag[0]}"
    start, end, prefix = _second[0]  # one read: another thread may enter a new second
    if not start <= now < end:
        start, end, prefix = _enter_second(now)
    micro = (now - start) // 1000
    if micro >= 100_000:  # 6 digits already: as f"{micro:06d}"
        ts = f"{prefix}.{micro}+00:00"
    elif micro:
        ts = f"{prefix}.{micro:06d}+00:00"
    else:
        ts = f"{prefix}+00:00"
    _last_ts[0] = (cid, ts)
    return cid, ts


_HEX16 = 1 << 60  # the first time in ns whose hex form has 16 digits unpadded
# The second new_checkpoint_id_ts last stamped: (its first ns, the next second's, prefix)
_second: list[tuple[int, int, str]] = [(0, 0, "")]
_last_second: list[tuple[int, str]] = [(-1, "")]  # (unix second, its ISO prefix)
_last_ts: list[tuple[str, str | None]] = [("", None)]  # (checkpoint id, its ts)


def _enter_second(now: int) -> tuple[int, int, str]:
    second = now // 1_000_000_000
    start = second * 1_000_000_000
    entry = _second[0] = (start, start + 1_000_000_000, _prefix(second))
    return entry


def checkpoint_ts(checkpoint_id: str) -> str | None:
    """The ISO-8601 UTC time an id of ``new_checkpoint_id`` holds, to the microsecond.

    The same text ``datetime.isoformat()`` writes (``2026-01-01T00:00:00.000001+00:00``,
    no fraction on a whole second). The engine stamps a checkpoint's ``ts`` with it, so a
    store can leave ``ts`` out and derive it again. None when ``checkpoint_id`` is not
    such an id (32 characters, the first 16 hex digits of a time in nanoseconds).
    """
    last = _last_ts[0]
    if last[0] == checkpoint_id:
        return last[1]
    ts: str | None = None
    head = checkpoint_id[:16]
    if len(checkpoint_id) == 32 and head.isalnum():  # int() also takes signs and spaces
        try:
            ts = _format_ts(int(head, 16))
        except (ValueError, OverflowError, OSError):
            ts = None
    _last_ts[0] = (checkpoint_id, ts)
    return ts


def _format_ts(ns: int) -> str:
    second, micro = divmod(ns // 1000, 1_000_000)
    cached = _last_second[0]
    prefix = cached[1] if cached[0] == second else _prefix(second)
    return f"{prefix}.{micro:06d}+00:00" if micro else f"{prefix}+00:00"


def _prefix(second: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a unix second (remembered for the next call)."""
    prefix = datetime.fromtimestamp(second, UTC).isoformat()[:-6]
    _last_second[0] = (second, prefix)
    return prefix
