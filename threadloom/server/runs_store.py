"""Run rows: status (pending, running, success, error, interrupted, timeout), the
arguments the run was made with (``kwargs``), its final output for ``join``.

The status is written when it changes, so a server that restarts finds every run it
had (``unfinished`` lists those a crash left pending or running).
"""

from __future__ import annotations

import builtins
import json
import time
from typing import Any

from threadloom.server.db import Database, Tx
from threadloom.server.wire import dumps, now_iso

_COLS = ("run_id, thread_id, assistant_id, created_at, updated_at, status, metadata, kwargs, "
         "multitask_strategy")
FINISHED = frozenset({"success", "error", "interrupted", "timeout"})


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    rid, tid, aid, created, updated, status, meta, kwargs, strategy = row
    return {"run_id": rid, "thread_id": tid, "assistant_id": aid, "created_at": created,
            "updated_at": updated, "status": status, "metadata": json.loads(meta),
            "kwargs": json.loads(kwargs), "multitask_strategy": strategy}


class Runs:
    """The run rows of one ``Database``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(self, run: dict[str, Any], owner: str) -> None:
        """Store a new run (a dict shaped as ``_row`` returns)."""
        await self.db.run(lambda tx: self.insert_tx(tx, run, owner))

    @staticmethod
    def insert_tx(tx: Tx, run: dict[str, Any], owner: str) -> None:
        """``insert`` inside the caller's transaction."""
        tx.execute(
            f"INSERT INTO tl_srv_runs ({_COLS}, owner, ord) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?)", (run["run_id"], run["thread_id"], run["assistant_id"], run["created_at"],
                      run["updated_at"], run["status"], dumps(run["metadata"]),
                      dumps(run["kwargs"]), run["multitask_strategy"], owner,
                      time.time_ns()))

    async def get(self, owner: str, thread_id: str | None, run_id: str) -> dict[str, Any] | None:
        """The run (of that thread when ``thread_id`` is given), or None."""
        sql = f"SELECT {_COLS} FROM tl_srv_runs WHERE run_id = ? AND owner = ?"
        params: list[Any] = [run_id, owner]
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params.append(thread_id)
        row = await self.db.run(lambda tx: tx.execute(sql, params).fetchone())
        return _row(row) if row is not None else None

    async def list(self, owner: str, thread_id: str, *, limit: int, offset: int,
                   status: str | None = None) -> list[dict[str, Any]]:
        """The thread's runs, newest first."""
        sql = f"SELECT {_COLS} FROM tl_srv_runs WHERE thread_id = ? AND owner = ?"
        params: list[Any] = [thread_id, owner]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        sql += " ORDER BY ord DESC LIMIT ? OFFSET ?"
        params += [limit, offset]
        rows = await self.db.run(lambda tx: tx.execute(sql, params).fetchall())
        return [_row(r) for r in rows]

    async def set_status(self, run_id: str, status: str, output: Any = None,
                         *, has_output: bool = False) -> None:
        """Record a run's new status (and, when it ends, its output)."""
        def update(tx: Tx) -> None:
            if has_output:
                tx.execute("UPDATE tl_srv_runs SET status = ?, updated_at = ?, output = ? "
                           "WHERE run_id = ?", (status, now_iso(), dumps(output), run_id))
            else:
                tx.execute("UPDATE tl_srv_runs SET status = ?, updated_at = ? WHERE run_id = ?",
                           (status, now_iso(), run_id))
        await self.db.run(update)

    async def output(self, run_id: str) -> Any:
        """The stored output of a finished run (None when it has none)."""
        row = await self.db.run(lambda tx: tx.execute(
            "SELECT output FROM tl_srv_runs WHERE run_id = ?", (run_id,)).fetchone())
        return json.loads(row[0]) if row and row[0] else None

    async def delete(self, owner: str, thread_id: str | None, run_id: str) -> bool:
        """Delete a run and its events; False when there is none."""
        def drop(tx: Tx) -> bool:
            sql = "DELETE FROM tl_srv_runs WHERE run_id = ? AND owner = ?"
            params: list[Any] = [run_id, owner]
            if thread_id is not None:
                sql += " AND thread_id = ?"
                params.append(thread_id)
            tx.execute(sql, params)
            if tx.rowcount == 0:
                return False
            tx.execute("DELETE FROM tl_srv_events WHERE run_id = ?", (run_id,))
            return True
        return await self.db.run(drop)

    async def since(self, owner: str, thread_id: str, ord_: int
                    ) -> builtins.list[tuple[int, str]]:
        """``(ord, run_id)`` of the thread's runs numbered ``ord_`` or later, oldest first
        (``ord`` orders a thread's runs: the thread stream's event ids start with it)."""
        rows = await self.db.run(lambda tx: tx.execute(
            "SELECT ord, run_id FROM tl_srv_runs WHERE thread_id = ? AND owner = ? AND "
            "ord >= ? ORDER BY ord, run_id", (thread_id, owner, ord_)).fetchall())
        return [(int(o), str(r)) for o, r in rows]

    async def active(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """The thread's pending and running runs, oldest first."""
        rows = await self.db.run(lambda tx: tx.execute(
            f"SELECT {_COLS} FROM tl_srv_runs WHERE thread_id = ? AND status IN "
            "('pending', 'running') ORDER BY ord", (thread_id,)).fetchall())
        return [_row(r) for r in rows]

    async def unfinished(self) -> builtins.list[tuple[dict[str, Any], str]]:
        """``(run, owner)`` of every run left pending or running, oldest first."""
        rows = await self.db.run(lambda tx: tx.execute(
            f"SELECT {_COLS}, owner FROM tl_srv_runs WHERE status IN ('pending', 'running') "
            "ORDER BY ord").fetchall())
        return [(_row(r[:-1]), r[-1]) for r in rows]

    async def mark_started(self, run_id: str, started_from: str | None) -> int:
        """Record that a run started on top of checkpoint ``started_from`` (None: a thread
        with no checkpoint yet); returns the attempt number (1 the first time)."""
        def update(tx: Tx) -> int:
            tx.execute("UPDATE tl_srv_runs SET status = 'running', updated_at = ?, "
                       "started_from = ?, attempt = attempt + 1 WHERE run_id = ?",
                       (now_iso(), started_from, run_id))
            row = tx.execute("SELECT attempt FROM tl_srv_runs WHERE run_id = ?",
                             (run_id,)).fetchone()
            return int(row[0]) if row else 1
        return await self.db.run(update)

    async def started_from(self, run_id: str) -> tuple[bool, str | None]:
        """``(started, checkpoint id it started on)`` of a run."""
        row = await self.db.run(lambda tx: tx.execute(
            "SELECT attempt, started_from FROM tl_srv_runs WHERE run_id = ?",
            (run_id,)).fetchone())
        return (bool(row and row[0]), row[1] if row else None)
