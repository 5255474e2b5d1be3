"""Assistants: each served graph's own, and those made by ``POST /assistants``, with
their versions, in the server's tables.

An assistant is a graph with a config, a context, metadata and a name. Each served graph
has one made at start (``created_by: system``, id ``uuid5`` of the graph name as
LangGraph's server derives it, visible to every caller); ``POST /assistants`` makes more
(owned by their maker, as threads are). ``PATCH`` writes a new version (LangGraph's
rules: ``config``/``context``/``name``/``description`` replace the current ones when
given, ``metadata`` is merged) and makes it the latest (a graph's own assistant may be
changed only on a server without keys: it is every caller's); ``set_latest`` makes an older
version current again; a run reads the latest version when it starts. Assistants of a
graph the server no longer serves are not found.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from threadloom.engine.compiled import CompiledGraph
from threadloom.server.db import Database, Tx
from threadloom.server.graphs import Assistant
from threadloom.server.threads_store import matches
from threadloom.server.wire import dumps, jsonable, now_iso

_COLS = ("assistant_id, graph_id, name, description, created_at, updated_at, version, "
         "config, context, metadata")
_VCOLS = "assistant_id, graph_id, name, description, created_at, version, config, context, metadata"
_VISIBLE = "(system = 1 OR owner = ?)"
# A graph's own assistant is everyone's: only a server without keys (every caller the
# anonymous principal, "") may change it; otherwise callers change their own.
_WRITABLE = "((system = 0 AND owner = ?) OR (system = 1 AND ? = ''))"


class AssistantExists(Exception):
    """``POST /assistants`` with an id that exists (``if_exists="raise"``)."""


class Assistants:
    """The assistants of one server: the served graphs (``by_graph``) and the rows.

    Args:
        graphs: graph name -> compiled graph; each gets its system assistant.
    """

    def __init__(self, graphs: dict[str, CompiledGraph]) -> None:
        self.graphs = graphs
        self.by_graph = {name: Assistant(name, g) for name, g in graphs.items()}
        self.db: Database | None = None

    def bind(self, db: Database) -> None:
        """Keep the assistants in ``db``; writes each graph's system assistant (version
        1) unless it is there already."""
        self.db = db

        def seed(tx: Tx) -> None:
            for a in self.by_graph.values():
                row = _params(a)
                tx.execute(f"INSERT INTO tl_srv_assistants ({_COLS}, owner, system) VALUES "
                           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 1) ON CONFLICT (assistant_id) "
                           "DO NOTHING", row)
                tx.execute(f"INSERT INTO tl_srv_assistant_versions ({_VCOLS}) VALUES "
                           "(?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (assistant_id, version) "
                           "DO NOTHING", _version_params(a))
        db.run_sync(seed)

    def _make(self, row: tuple[Any, ...]) -> Assistant | None:
        aid, graph_id, name, desc, created, updated, version, config, context, meta = row
        graph = self.graphs.get(graph_id)
        if graph is None:
            return None
        return Assistant(graph_id, graph, assistant_id=aid, created_at=created,
                         updated_at=updated or created, config=json.loads(config),
                         context=json.loads(context), metadata=json.loads(meta),
                         description=desc, name=name, version=int(version))

    async def _run(self, fn: Any) -> Any:
        if self.db is None:
            raise RuntimeError("Assistants.bind(db) was not called")
        return await self.db.run(fn)

    async def get(self, owner: str, assistant_id: str) -> Assistant | None:
        """The assistant (latest version) this owner sees, or None."""
        row = await self._run(lambda tx: tx.execute(
            f"SELECT {_COLS} FROM tl_srv_assistants WHERE assistant_id = ? AND {_VISIBLE}",
            (assistant_id, owner)).fetchone())
        return self._make(row) if row is not None else None

    async def resolve(self, owner: str, ident: str) -> Assistant | None:
        """The assistant an id or a graph name names (runs accept both; a graph name
        means its system assistant)."""
        return await self._run(lambda tx: self.resolve_tx(tx, owner, ident))  # type: ignore[no-any-return]

    def resolve_tx(self, tx: Tx, owner: str, ident: str) -> Assistant | None:
        """``resolve`` inside the caller's transaction (one statement)."""
        system = self.by_graph.get(ident)
        other = system.assistant_id if system is not None else ident
        rows = tx.execute(f"SELECT {_COLS} FROM tl_srv_assistants WHERE assistant_id IN "
                          f"(?, ?) AND {_VISIBLE}", (ident, other, owner)).fetchall()
        rows.sort(key=lambda r: r[0] != ident)  # an assistant with that id first
        return self._make(rows[0]) if rows else None

    async def search(self, owner: str, *, graph_id: str | None = None,
                     name: str | None = None, metadata: dict[str, Any] | None = None,
                     sort_by: str | None = None, sort_order: str | None = None
                     ) -> list[Assistant]:
        """The assistants matching every filter (``name``: a case-insensitive substring;
        ``metadata``: equal values), newest first unless ``sort_by`` says otherwise."""
        order = "ASC" if sort_order == "asc" else "DESC"
        sql = (f"SELECT {_COLS} FROM tl_srv_assistants WHERE {_VISIBLE} "
               f"ORDER BY {sort_by or 'created_at'} {order}, assistant_id {order}")
        rows = await self._run(lambda tx: tx.execute(sql, (owner,)).fetchall())
        out = []
        for row in rows:
            a = self._make(row)
            if a is None or (graph_id is not None and a.graph_id != graph_id):
                continue
            if name is not None and name.lower() not in a.name.lower():
                continue
            if matches(a.metadata, metadata):
                out.append(a)
        return out

    async def create(self, owner: str, graph_id: str, *, assistant_id: str | None = None,
                     config: dict[str, Any] | None = None,
                     context: dict[str, Any] | None = None,
                     metadata: dict[str, Any] | None = None, name: str | None = None,
                     description: str | None = None, if_exists: str | None = None
                     ) -> Assistant:
        """A new assistant on a served graph (version 1); ``if_exists="do_nothing"``
        answers the one there.

        Raises:
            KeyError: ``graph_id`` is not served.
            AssistantExists: the id exists (another owner's too) under ``raise``.
        """
        graph = self.graphs.get(graph_id)
        if graph is None:
            raise KeyError(graph_id)
        made = Assistant(graph_id, graph, assistant_id=assistant_id or str(uuid.uuid4()),
                         config=jsonable(config or {}), context=jsonable(context or {}),
                         metadata=jsonable(metadata or {}), name=name or "Untitled",
                         description=description)

        def insert(tx: Tx) -> Assistant | None:
            row = tx.execute(f"SELECT {_COLS}, owner, system FROM tl_srv_assistants "
                             "WHERE assistant_id = ?", (made.assistant_id,)).fetchone()
            if row is not None:
                if if_exists == "do_nothing" and (row[-1] or row[-2] == owner):
                    return self._make(row[:-2])
                raise AssistantExists(made.assistant_id)
            tx.execute(f"INSERT INTO tl_srv_assistants ({_COLS}, owner, system) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)", (*_params(made), owner))
            tx.execute(f"INSERT INTO tl_srv_assistant_versions ({_VCOLS}) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?, ?)", _version_params(made))
            return made
        found = await self._run(insert)
        if found is None:  # an existing one whose graph is no longer served
            raise AssistantExists(made.assistant_id)
        return found  # type: ignore[no-any-return]

    async def update(self, owner: str, assistant_id: str, changes: dict[str, Any]
                     ) -> Assistant | None:
        """Write a new version from the latest and ``changes`` (``graph_id``, ``config``,
        ``context``, ``name``, ``description`` replace; ``metadata`` merges); None when
        this owner sees no such assistant.

        Raises:
            KeyError: ``changes["graph_id"]`` is not served.
        """
        if changes.get("graph_id") is not None and changes["graph_id"] not in self.graphs:
            raise KeyError(changes["graph_id"])

        def write(tx: Tx) -> Assistant | None:
            current = _latest(tx, self, owner, assistant_id, write=True)
            if current is None:
                return None
            top = tx.execute("SELECT MAX(version) FROM tl_srv_assistant_versions WHERE "
                             "assistant_id = ?", (assistant_id,)).fetchone()
            graph_id = changes.get("graph_id") or current.graph_id
            new = Assistant(
                graph_id, self.graphs[graph_id], assistant_id=assistant_id,
                created_at=current.created_at, updated_at=now_iso(),
                config=jsonable(_given(changes, "config", current.config)),
                context=jsonable(_given(changes, "context", current.context)),
                metadata={**current.metadata, **jsonable(changes.get("metadata") or {})},
                name=changes.get("name") or current.name,
                description=_given(changes, "description", current.description),
                version=int(top[0] if top and top[0] is not None else current.version) + 1)
            _save_latest(tx, new)
            tx.execute(f"INSERT INTO tl_srv_assistant_versions ({_VCOLS}) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?, ?)", _version_params(new, now=new.updated_at))
            return new
        return await self._run(write)  # type: ignore[no-any-return]

    async def set_latest(self, owner: str, assistant_id: str, version: int
                         ) -> Assistant | None | bool:
        """Make ``version`` the current one; None for no such assistant, False for no
        such version."""
        def switch(tx: Tx) -> Assistant | None | bool:
            current = _latest(tx, self, owner, assistant_id, write=True)
            if current is None:
                return None
            row = tx.execute(f"SELECT {_VCOLS} FROM tl_srv_assistant_versions WHERE "
                             "assistant_id = ? AND version = ?", (assistant_id, version)
                             ).fetchone()
            picked = self._version(row) if row is not None else None
            if picked is None:
                return False
            picked.created_at, picked.updated_at = current.created_at, now_iso()
            _save_latest(tx, picked)
            return picked
        return await self._run(switch)  # type: ignore[no-any-return]

    def _version(self, row: tuple[Any, ...]) -> Assistant | None:
        aid, graph_id, name, desc, created, version, config, context, meta = row
        return self._make((aid, graph_id, name, desc, created, created, version, config,
                           context, meta))

    async def versions(self, owner: str, assistant_id: str, metadata: dict[str, Any] | None,
                       limit: int, offset: int) -> list[dict[str, Any]] | None:
        """The assistant's versions, newest first (wire bodies without ``updated_at``);
        None when this owner sees no such assistant."""
        def read(tx: Tx) -> list[dict[str, Any]] | None:
            if _latest(tx, self, owner, assistant_id) is None:
                return None
            rows = tx.execute(f"SELECT {_VCOLS} FROM tl_srv_assistant_versions WHERE "
                              "assistant_id = ? ORDER BY version DESC", (assistant_id,)
                              ).fetchall()
            out = []
            for row in rows:
                a = self._version(row)
                if a is not None and matches(a.metadata, metadata):
                    body = a.json()
                    del body["updated_at"]
                    out.append(body)
            return out[offset:offset + limit]
        return await self._run(read)  # type: ignore[no-any-return]

    async def delete(self, owner: str, assistant_id: str) -> bool:
        """Delete the assistant and its versions; False when this owner sees none."""
        def drop(tx: Tx) -> bool:
            tx.execute(f"DELETE FROM tl_srv_assistants WHERE assistant_id = ? AND {_WRITABLE}",
                       (assistant_id, owner, owner))
            if tx.rowcount == 0:
                return False
            tx.execute("DELETE FROM tl_srv_assistant_versions WHERE assistant_id = ?",
                       (assistant_id,))
            return True
        return await self._run(drop)  # type: ignore[no-any-return]


def _given(changes: dict[str, Any], key: str, current: Any) -> Any:
    value = changes.get(key)
    return current if value is None else value


def _latest(tx: Tx, store: Assistants, owner: str, assistant_id: str, *,
            write: bool = False) -> Assistant | None:
    if write:
        row = tx.execute(f"SELECT {_COLS} FROM tl_srv_assistants WHERE assistant_id = ? AND "
                         f"{_WRITABLE}", (assistant_id, owner, owner)).fetchone()
    else:
        row = tx.execute(f"SELECT {_COLS} FROM tl_srv_assistants WHERE assistant_id = ? AND "
                         f"{_VISIBLE}", (assistant_id, owner)).fetchone()
    return store._make(row) if row is not None else None


def _save_latest(tx: Tx, a: Assistant) -> None:
    tx.execute("UPDATE tl_srv_assistants SET graph_id = ?, name = ?, description = ?, "
               "updated_at = ?, version = ?, config = ?, context = ?, metadata = ? "
               "WHERE assistant_id = ?",
               (a.graph_id, a.name, a.description, a.updated_at, a.version, dumps(a.config),
                dumps(a.context), dumps(a.metadata), a.assistant_id))


def _params(a: Assistant) -> tuple[Any, ...]:
    return (a.assistant_id, a.graph_id, a.name, a.description, a.created_at, a.updated_at,
            a.version, dumps(a.config), dumps(a.context), dumps(a.metadata))


def _version_params(a: Assistant, now: str | None = None) -> tuple[Any, ...]:
    return (a.assistant_id, a.graph_id, a.name, a.description, now or a.created_at,
            a.version, dumps(a.config), dumps(a.context), dumps(a.metadata))
