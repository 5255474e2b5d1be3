"""Thread rows: owner, metadata, status, the latest values and interrupts.

A thread's checkpoints live in the checkpointer; its row here is what ``GET
/threads/{id}`` answers and what ``/threads/search`` filters. Every query names the
owner, so one principal never sees another's thread (the routes answer 404).
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.server.db import Database, Tx
from threadloom.server.wire import dumps, now_iso, uuid7


class OtherGraph(Exception):
    """A run named a graph other than the one its thread belongs to."""


def _foreign_keys(tx: Tx, thread_id: str, state_keys: Any) -> list[str]:
    """The thread's stored value keys that ``state_keys`` lacks (read only when another
    graph runs on the thread, so a usual run does not decode the thread's values)."""
    row = tx.execute("SELECT vals FROM tl_srv_threads WHERE thread_id = ?",
                     (thread_id,)).fetchone()
    stored = json.loads(row[0]) if row and row[0] else None
    if not isinstance(stored, dict) or state_keys is None:
        return []
    return sorted(set(stored) - set(state_keys))

_COLS = ("thread_id, created_at, updated_at, state_updated_at, metadata, status, config, "
         "vals, interrupts, error")


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    tid, created, updated, state_at, meta, status, config, vals, interrupts, error = row
    return {"thread_id": tid, "created_at": created, "updated_at": updated,
            "state_updated_at": state_at, "metadata": json.loads(meta), "status": status,
            "config": json.loads(config), "values": json.loads(vals) if vals else None,
            "interrupts": json.loads(interrupts),
            "error": json.loads(error) if error else None}


def matches(meta: dict[str, Any], want: dict[str, Any] | None) -> bool:
    """Whether ``meta`` holds every key of ``want`` with an equal value (JSON-equal)."""
    if not want:
        return True
    return all(k in meta and json.dumps(meta[k], sort_keys=True) ==
               json.dumps(v, sort_keys=True, default=str) for k, v in want.items())


class Threads:
    """The thread rows of one ``Database``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, owner: str, thread_id: str | None, metadata: dict[str, Any] | None,
                     *, if_exists: str | None = None, temporary: bool = False
                     ) -> tuple[dict[str, Any], bool]:
        """Insert a thread (a new id when ``thread_id`` is None).

        Returns:
            ``(thread, created)``; ``created`` is False when ``if_exists="do_nothing"``
            found one already (of this owner).

        Raises:
            KeyError: the id exists (unless ``if_exists="do_nothing"``), or belongs to
                another owner.
        """
        return await self.db.run(lambda tx: self.create_tx(
            tx, owner, thread_id, metadata, if_exists=if_exists, temporary=temporary))

    @staticmethod
    def create_tx(tx: Tx, owner: str, thread_id: str | None, metadata: dict[str, Any] | None,
                  *, if_exists: str | None = None, temporary: bool = False
                  ) -> tuple[dict[str, Any], bool]:
        """``create`` inside the caller's transaction."""
        tid = thread_id or uuid7()
        now = now_iso()
        found = tx.execute(f"SELECT owner, {_COLS} FROM tl_srv_threads WHERE thread_id = ?",
                           (tid,)).fetchone() if thread_id is not None else None
        if found is not None:
            if found[0] == owner and if_exists == "do_nothing":
                return _row(found[1:]), False
            raise KeyError(tid)
        tx.execute("INSERT INTO tl_srv_threads (thread_id, owner, created_at, updated_at, "
                   "state_updated_at, metadata, status, config, vals, interrupts, error, "
                   "temporary) VALUES (?, ?, ?, ?, ?, ?, 'idle', '{}', NULL, '{}', NULL, ?)",
                   (tid, owner, now, now, now, dumps(metadata or {}), int(temporary)))
        return {"thread_id": tid, "created_at": now, "updated_at": now,
                "state_updated_at": now, "metadata": metadata or {}, "status": "idle",
                "config": {}, "values": None, "interrupts": {}, "error": None}, True

    async def get(self, owner: str, thread_id: str) -> dict[str, Any] | None:
        """The thread, or None when it does not exist for this owner."""
        return await self.db.run(lambda tx: self.get_tx(tx, owner, thread_id))

    @staticmethod
    def get_tx(tx: Tx, owner: str, thread_id: str) -> dict[str, Any] | None:
        """``get`` inside the caller's transaction."""
        row = tx.execute(f"SELECT {_COLS} FROM tl_srv_threads WHERE thread_id = ? AND "
                         "owner = ?", (thread_id, owner)).fetchone()
        return _row(row) if row is not None else None

    @staticmethod
    def claim_tx(tx: Tx, owner: str, thread_id: str, metadata: dict[str, Any],
                 state_keys: Any = None) -> dict[str, Any] | None:
        """Mark one of ``owner``'s threads ``busy`` for a new run and merge ``metadata``
        into its own (two statements); None when this owner has no such thread.

        Raises:
            OtherGraph: the thread belongs to another graph than
                ``metadata["graph_id"]`` and holds values under keys that are not in
                ``state_keys`` (the run's graph's channels), which the engine refuses too;
                raised before anything is written (the transaction rolls back: the thread
                stays exactly as it was). A graph whose state covers the thread's keys
                runs on it, as on LangGraph's server.
        """
        row = tx.execute("SELECT metadata FROM tl_srv_threads WHERE thread_id = ? AND "
                         "owner = ?", (thread_id, owner)).fetchone()
        if row is None:
            return None
        held = json.loads(row[0])
        graph_id = metadata.get("graph_id")
        other = graph_id is not None and held.get("graph_id") not in (None, graph_id)
        foreign = _foreign_keys(tx, thread_id, state_keys) if other else []
        if foreign:
            raise OtherGraph(f"thread {thread_id} belongs to graph {held['graph_id']!r}: "
                             f"it holds {foreign} that graph {graph_id!r} has no channel for; "
                             "run it with its own graph's assistant")
        merged = {**held, **metadata}
        tx.execute("UPDATE tl_srv_threads SET status = 'busy', metadata = ?, updated_at = ? "
                   "WHERE thread_id = ?", (dumps(merged), now_iso(), thread_id))
        return merged

    async def owner_of(self, thread_id: str) -> str | None:
        """Who owns the thread (None when it does not exist)."""
        row = await self.db.run(lambda tx: tx.execute(
            "SELECT owner FROM tl_srv_threads WHERE thread_id = ?", (thread_id,)).fetchone())
        return row[0] if row else None

    async def patch(self, owner: str, thread_id: str, metadata: dict[str, Any] | None
                    ) -> dict[str, Any] | None:
        """Merge ``metadata`` into the thread's; None when there is no such thread."""
        def update(tx: Tx) -> dict[str, Any] | None:
            row = tx.execute(f"SELECT {_COLS} FROM tl_srv_threads WHERE thread_id = ? "
                             "AND owner = ?", (thread_id, owner)).fetchone()
            if row is None:
                return None
            thread = _row(row)
            thread["metadata"] = {**thread["metadata"], **(metadata or {})}
            thread["updated_at"] = now_iso()
            tx.execute("UPDATE tl_srv_threads SET metadata = ?, updated_at = ? WHERE "
                       "thread_id = ?", (dumps(thread["metadata"]), thread["updated_at"],
                                          thread_id))
            return thread
        return await self.db.run(update)

    async def delete(self, owner: str, thread_id: str) -> bool:
        """Delete the thread, its runs and their events; False when there is none."""
        def drop(tx: Tx) -> bool:
            tx.execute("DELETE FROM tl_srv_threads WHERE thread_id = ? AND owner = ?",
                       (thread_id, owner))
            if tx.rowcount == 0:
                return False
            tx.execute("DELETE FROM tl_srv_events WHERE run_id IN (SELECT run_id FROM "
                       "tl_srv_runs WHERE thread_id = ?)", (thread_id,))
            tx.execute("DELETE FROM tl_srv_runs WHERE thread_id = ?", (thread_id,))
            return True
        return await self.db.run(drop)

    async def search(self, owner: str, *, metadata: dict[str, Any] | None = None,
                     values: dict[str, Any] | None = None, ids: list[str] | None = None,
                     status: str | None = None, sort_by: str | None = None,
                     sort_order: str | None = None) -> list[dict[str, Any]]:
        """This owner's threads that match every filter, sorted (newest first by default)."""
        column = sort_by or "created_at"
        order = "ASC" if sort_order == "asc" else "DESC"
        sql = f"SELECT {_COLS} FROM tl_srv_threads WHERE owner = ? AND temporary = 0"
        params: list[Any] = [owner]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        sql += f" ORDER BY {column} {order}, thread_id {order}"  # names from a Literal
        rows = await self.db.run(lambda tx: tx.execute(sql, params).fetchall())
        wanted = set(ids) if ids else None
        out = []
        for row in rows:
            thread = _row(row)
            if wanted is not None and thread["thread_id"] not in wanted:
                continue
            if matches(thread["metadata"], metadata) and matches(thread["values"] or {}, values):
                out.append(thread)
        return out

    async def set_state(self, thread_id: str, *, status: str, values: Any = None,
                        interrupts: dict[str, Any] | None = None, error: Any = None,
                        metadata: dict[str, Any] | None = None, state_changed: bool = True
                        ) -> None:
        """Record a thread's status after a run (and its values, interrupts, error)."""
        now = now_iso()

        def update(tx: Tx) -> None:
            if metadata:
                row = tx.execute("SELECT metadata FROM tl_srv_threads WHERE thread_id = ?",
                                 (thread_id,)).fetchone()
                merged = {**json.loads(row[0]), **metadata} if row else metadata
                tx.execute("UPDATE tl_srv_threads SET metadata = ? WHERE thread_id = ?",
                           (dumps(merged), thread_id))
            if state_changed:
                tx.execute("UPDATE tl_srv_threads SET status = ?, vals = ?, interrupts = ?, "
                           "error = ?, updated_at = ?, state_updated_at = ? WHERE thread_id = ?",
                           (status, dumps(values) if values is not None else None,
                            dumps(interrupts or {}), dumps(error) if error else None, now, now,
                            thread_id))
            else:
                tx.execute("UPDATE tl_srv_threads SET status = ?, updated_at = ? WHERE "
                           "thread_id = ?", (status, now, thread_id))
        await self.db.run(update)

    async def temporary_ids(self) -> list[str]:
        """Threads made for stateless runs (deleted when their run ends)."""
        rows = await self.db.run(lambda tx: tx.execute(
            "SELECT thread_id FROM tl_srv_threads WHERE temporary = 1").fetchall())
        return [r[0] for r in rows]
