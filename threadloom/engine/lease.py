"""One writer per thread: a run holds its thread's lease while it runs.

Checkpointers that store outside this process (SQLite, PostgreSQL) hand out leases with
fencing tokens (``acquire_lease``); the run puts its token in
``config["configurable"]["__lease_token"]`` and every write it makes is checked against
it in the write's own transaction, so a run that lost its lease (say, it stalled past the
lease's time-to-live and another worker took the thread) can never write again. In-memory
checkpointers need no lease: the in-process guard in ``compiled.py`` covers them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.leases import pid_space
from threadloom.engine.heartbeat import HEARTBEATS
from threadloom.errors import ThreadBusyError
from threadloom.workers import to_worker

if TYPE_CHECKING:
    from threadloom.engine.scheduler import RunLoop

LEASE_TTL_S = 60.0
"""How long a run's lease lasts without renewal: the longest a thread stays taken after
its holder died where no PID check can tell (another machine, another container)."""
HEARTBEAT_S: float | None = None
"""How often a held lease is renewed while the run goes on, even inside a long node
(None: a quarter of ``LEASE_TTL_S``)."""


def _new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{pid_space()}-{uuid.uuid4().hex[:8]}"


_active: set[tuple[int, str, str]] = set()  # the (checkpointer, thread, ns) runs of _Claim
_active_lock = threading.Lock()
OWNER = _new_owner()
"""This process as a lease owner; see ``checkpoint.leases`` for how liveness is judged.
A forked child gets its own (two forked workers must never share a lease)."""


def _owner_after_fork() -> None:
    """A forked child: an owner of its own, and none of the parent's runs (their
    in-process claims are the parent's: the child runs none of them)."""
    global OWNER, _active_lock
    OWNER = _new_owner()
    _active.clear()
    _active_lock = threading.Lock()


os.register_at_fork(after_in_child=_owner_after_fork)


class ThreadLease:
    """A held lease: renewed as the run goes on, released when it ends."""

    def __init__(self, cp: Any, loop: RunLoop, thread_id: str, token: int) -> None:
        self.cp = cp
        self.loop = loop
        self.thread_id = thread_id
        self.token = token
        self.renewed_at = time.monotonic()
        self.heartbeat: int | None = None  # its key in HEARTBEATS

    @classmethod
    async def acquire(cls, cp: Any, loop: RunLoop, busy_timeout: float) -> ThreadLease | None:
        """Take the lease of ``loop``'s thread, waiting up to ``busy_timeout`` seconds.

        Returns None when the checkpointer has no leases (or there is no checkpointer).

        Raises:
            ThreadBusyError: another run holds the thread past ``busy_timeout``.
        """
        if cp is None or getattr(cp, "inline_io", False) or not hasattr(cp, "acquire_lease"):
            return None
        conf = loop.config["configurable"]
        thread_id = conf.get("thread_id")
        if thread_id is None:
            return None
        deadline = time.monotonic() + busy_timeout
        delay = 0.01
        while True:
            try:
                token = await _call(loop, cp.acquire_lease, thread_id, OWNER, LEASE_TTL_S)
                break
            except ThreadBusyError:
                if time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
        conf["__lease_token"] = token
        lease = cls(cp, loop, thread_id, token)
        loop.lease = lease
        lease.heartbeat = HEARTBEATS.add(lease.beat, HEARTBEAT_S or LEASE_TTL_S / 4)
        return lease

    def beat(self) -> bool:
        """Renew the lease from the heartbeat thread, so a live run keeps its thread
        through a node longer than ``LEASE_TTL_S`` and a dead one (a crash, a SIGSTOP)
        loses it when it expires. False once the lease was taken or broken (the run's
        next write is fenced)."""
        try:
            self.cp.renew_lease(self.thread_id, self.token, LEASE_TTL_S)
        except ThreadBusyError:
            return False
        return True

    async def renew_if_due(self) -> None:
        """Extend the lease when half its time-to-live has passed."""
        if time.monotonic() - self.renewed_at > LEASE_TTL_S / 2:
            await _call(self.loop, self.cp.renew_lease, self.thread_id, self.token, LEASE_TTL_S)
            self.renewed_at = time.monotonic()

    async def release(self) -> None:
        """Give the thread back (a stale token is ignored by the checkpointer)."""
        if self.heartbeat is not None:
            HEARTBEATS.remove(self.heartbeat)
        self.loop.config["configurable"].pop("__lease_token", None)
        await _call(self.loop, self.cp.release_lease, self.thread_id, self.token)


async def _call(loop: RunLoop, fn: Any, *args: Any) -> Any:
    if loop.blocking_ok:
        return fn(*args)
    return await to_worker(fn, *args)


class _Claim:
    """In-process guard: one run per (checkpointer, thread, namespace) at a time."""

    def __init__(self, cp: Any, cfg: dict[str, Any], busy_timeout: float = 0.0) -> None:
        conf = cfg.get("configurable") or {}
        self.key = (
            (id(cp), str(conf.get("thread_id")), conf.get("checkpoint_ns", ""))
            if (cp is not None and "thread_id" in conf)
            else None
        )
        self.busy_timeout = busy_timeout

    def _take(self) -> bool:
        with _active_lock:
            if self.key in _active:
                return False
            _active.add(self.key)  # type: ignore[arg-type]
            return True

    async def __aenter__(self) -> None:
        """Claim the thread, waiting up to ``busy_timeout`` seconds for the run holding it.

        Raises:
            ThreadBusyError: the thread is still running in this process after the wait.
        """
        if self.key is None or self._take():
            return
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while time.monotonic() + delay <= deadline:
            await asyncio.sleep(delay)
            if self._take():
                return
            delay = min(delay * 2, 0.1)
        waited = f"still running after {self.busy_timeout:g}s of waiting" if (
            self.busy_timeout) else "already running"
        raise ThreadBusyError(
            f"thread {self.key[1]!r} is {waited}: another invoke/stream in this process has "
            "not finished (two runs on one thread would interleave checkpoints). Wait for it "
            "with busy_timeout=SECONDS (compile(busy_timeout=...) or "
            "create_agent(busy_timeout=...)), or use another thread id",
            thread_id=self.key[1],
        )

    async def __aexit__(self, *exc: object) -> None:
        if self.key is not None:
            with _active_lock:
                _active.discard(self.key)
