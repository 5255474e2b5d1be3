"""One thread per process renews every lease this process's runs hold (``lease``).

A run's lease must outlive its longest node, so it is renewed on a timer, not only between
steps. Starting a thread per run cost more than a whole SQLite super-step (~0.3 ms per
run); one daemon thread serves them all instead. It sleeps until the earliest renewal is
due, so a run that starts and ends within one interval wakes it at most once, and takes
no lock of the run's besides this registry's. A forked child starts with none (the
parent's leases are the parent's to renew).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable

__all__ = ["HEARTBEATS", "Heartbeats"]


class _Beat:
    __slots__ = ("due", "renew", "interval")

    def __init__(self, due: float, renew: Callable[[], bool], interval: float) -> None:
        self.due, self.renew, self.interval = due, renew, interval


class Heartbeats:
    """Renewals on a timer: ``add(renew, interval)`` calls ``renew()`` every ``interval``
    seconds (the first ``interval`` after ``add``) on the shared thread until ``remove``
    or until ``renew`` returns False; an exception it raises is skipped (the next beat
    tries again)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every renewal and the thread (a forked child's start)."""
        self._wake = threading.Condition(threading.Lock())
        self._beats: dict[int, _Beat] = {}
        self._thread: threading.Thread | None = None
        self._sleeping_until = math.inf  # when the thread next wakes by itself (monotonic s)
        self._next_key = 0

    def add(self, renew: Callable[[], bool], interval: float) -> int:
        """Register ``renew`` (``interval`` in seconds); returns the key ``remove`` takes."""
        with self._wake:
            self._next_key += 1
            beat = self._beats[self._next_key] = _Beat(time.monotonic() + interval, renew,
                                                       interval)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="threadloom-lease-heartbeat", daemon=True)
                self._thread.start()
            elif beat.due < self._sleeping_until:
                self._wake.notify()
            return self._next_key

    def remove(self, key: int) -> None:
        """Stop renewing ``key`` (a key not held is ignored)."""
        with self._wake:
            self._beats.pop(key, None)

    def held(self) -> int:
        """How many renewals are registered."""
        return len(self._beats)

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                due = [(key, beat) for key, beat in self._beats.items() if beat.due <= now]
                for _, beat in due:
                    beat.due = now + beat.interval
                if not due:
                    until = min((b.due for b in self._beats.values()), default=math.inf)
                    self._sleeping_until = until
                    self._wake.wait(None if until == math.inf else until - now)
                    self._sleeping_until = math.inf
                    continue
            for key, beat in due:  # outside the lock: a renewal is a store round trip
                try:
                    keep = beat.renew()
                except Exception:  # noqa: BLE001, S112 - the store is unreachable: next beat
                    continue
                if not keep:
                    self.remove(key)


HEARTBEATS = Heartbeats()
os.register_at_fork(after_in_child=HEARTBEATS.reset)
