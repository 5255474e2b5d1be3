"""Thread leases with fencing tokens, shared by every ``StoredCheckpointer``.

Leases: ``acquire_lease(thread_id, owner, ttl_s)`` returns a fencing token, an integer
that grows with every acquisition of that thread. A ``put``/``put_writes`` whose config
carries ``configurable["__lease_token"]`` is refused with ``ThreadBusyError`` unless that
token is still the thread's current one, checked in the same transaction as the write, so
a worker that lost its lease can never write after the new holder started.

A crashed run cannot give its lease back. An owner named ``"<host>:<pid>:<space>-<tag>"``
(the engine's format, ``engine/lease.py``) whose host is this machine, whose ``space``
is this process's PID space (``pid_space()``: the PID namespace and boot) and whose
process no longer exists is treated as gone, so a run resumed on the same machine right
after a crash (``kill -9``, OOM) takes the thread at once. Any other holder (another
machine, another container with the same hostname, an owner in another format) is alive
until its lease expires: the engine renews it while the run goes on (``LEASE_TTL_S``),
and an operator can call ``break_lease``. A
wrongly broken lease cannot corrupt the thread: the old holder's writes are fenced off.
``delete_thread`` breaks the lease the same way, so a run cannot write into a thread
deleted under it; ``threadloom threads delete``/``fork`` take the lease themselves for
the length of their write, and refuse a thread a live run holds.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from threadloom.errors import ThreadBusyError

LEASE_TOKEN_KEY = "__lease_token"


@functools.cache
def pid_space() -> str:
    """A short id of the PID space this process lives in: its PID namespace and the boot.

    Two containers can share a hostname while their PIDs mean different processes (each
    has its own PID namespace), and a PID seen before a reboot means nothing after it;
    only an owner of the same space may be judged by a PID check. Where there is no
    ``/proc`` (not Linux), the host itself is the space.
    """
    try:
        ns = os.readlink("/proc/self/ns/pid")
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
    except OSError:
        return "h"
    return hashlib.sha256(f"{ns}/{boot}".encode()).hexdigest()[:12]


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` (``"<host>:<pid>:<space>-<tag>"``) names a process of this host
    and of this PID space (``pid_space``) that no longer runs. Any other owner (another
    host, another PID namespace with the same hostname, another format, a live or
    unknowable process) counts as alive: its lease lasts until it expires.
    """
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    if not parts[2].startswith(pid_space() + "-"):
        return False  # a PID of another namespace (or boot) says nothing here
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: existence check only, nothing is sent
    except ProcessLookupError:
        return True
    except OSError:  # exists but is not ours (EPERM), or cannot tell
        return False
    return False


class Lease(NamedTuple):
    """A thread's lease row: ``owner`` is None once released."""

    owner: str | None
    token: int
    expires_at: float


class LeaseMixin:
    """``acquire_lease``/``renew_lease``/``release_lease`` and the fence check of writes.

    The host class provides ``_tx(write)`` yielding an object with ``get_lease`` and
    ``put_lease`` (see ``stored.Tx``).
    """

    def _tx(self, write: bool) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _lease_tx(self, thread_id: str) -> AbstractContextManager[Any]:
        """The write transaction ``acquire_lease`` runs in (PostgreSQL waits less)."""
        return self._tx(True)

    def acquire_lease(self, thread_id: str, owner: str, ttl_s: float) -> int:
        """Take the thread's lease for ``ttl_s`` seconds; returns the new fencing token.

        Re-acquiring by the same ``owner`` renews it with a new token.

        Raises:
            ThreadBusyError: another owner holds an unexpired lease (or, on PostgreSQL,
                a transaction that stalled holding its row).
        """
        with self._lease_tx(thread_id) as tx:
            lease = tx.get_lease(thread_id)
            now = time.time()
            if (
                lease is not None
                and lease.owner is not None
                and lease.owner != owner
                and lease.expires_at > now
                and not owner_is_dead(lease.owner)
            ):
                raise ThreadBusyError(
                    f"thread {thread_id!r} is busy: a run of {lease.owner!r} is using it (its "
                    "lease is held while that run lasts and lapses "
                    f"{lease.expires_at - now:.0f}s after it stops renewing, e.g. if its "
                    "process died). Wait for it with busy_timeout=SECONDS "
                    "(compile(busy_timeout=...) or create_agent(busy_timeout=...)), or use "
                    "another thread id",
                    thread_id=thread_id,
                )
            token = (lease.token if lease else 0) + 1
            tx.put_lease(thread_id, Lease(owner, token, now + ttl_s))
            return token

    def renew_lease(self, thread_id: str, token: int, ttl_s: float) -> None:
        """Extend a held lease. Raises ``ThreadBusyError`` when ``token`` is stale."""
        with self._tx(True) as tx:
            lease = self._current_lease(tx, thread_id, token)
            tx.put_lease(thread_id, lease._replace(expires_at=time.time() + ttl_s))

    def release_lease(self, thread_id: str, token: int) -> None:
        """Give the lease back; a stale ``token`` is ignored (someone else holds it)."""
        with self._tx(True) as tx:
            lease = tx.get_lease(thread_id)
            if lease is not None and lease.token == token and lease.owner is not None:
                tx.put_lease(thread_id, Lease(None, token, 0.0))

    def break_lease(self, thread_id: str) -> None:
        """Free a thread's lease whoever holds it (an operator's remedy for a worker that
        died on another machine). The holder's token becomes stale: its writes are refused.
        """
        with self._tx(True) as tx:
            lease = tx.get_lease(thread_id)
            if lease is not None and lease.owner is not None:
                tx.put_lease(thread_id, Lease(None, lease.token, 0.0))

    def _check_fence(self, tx: Any, thread_id: str, config: Mapping[str, Any]) -> None:
        token = (config.get("configurable") or {}).get(LEASE_TOKEN_KEY)
        if token is not None:
            self._current_lease(tx, thread_id, token)

    @staticmethod
    def _current_lease(tx: Any, thread_id: str, token: int) -> Lease:
        lease = tx.get_lease(thread_id)
        if lease is not None and lease.owner is None and lease.token == token:
            raise ThreadBusyError(
                f"lease token {token!r} of thread {thread_id!r} is stale: the lease was "
                "broken (break_lease) or the thread was deleted (delete_thread) while this "
                "run held it; nothing more is written",
                thread_id=thread_id,
            )
        if lease is None or lease.owner is None or lease.token != token:
            raise ThreadBusyError(
                f"lease token {token!r} of thread {thread_id!r} is stale "
                f"(current: {lease.token if lease else None!r}); another run took the thread",
                thread_id=thread_id,
            )
        return lease
