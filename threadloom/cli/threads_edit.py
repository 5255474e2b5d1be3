"""``threadloom threads fork|delete``: write a thread of a checkpoint store.

``fork`` writes a new checkpoint whose parent is the chosen one: with ``--graph
MODULE:ATTR`` it goes through ``update_state`` (the graph's reducers apply, ``--as-node``
routes); without a graph the update is written straight through the checkpointer: each
key replaces the stored value, except ``messages``, whose new messages are appended.
Either way the next ``run`` of the thread continues from the fork (the newest
checkpoint).

Both first check everything read-only (the thread, the checkpoint, the update), so a
refused command leaves the store as it was; only then do they open it for writing and
hold the thread's lease while they write, so no run starts meanwhile, refusing a thread
whose lease a live run holds (it would write on after them).
"""

from __future__ import annotations

import copy
import datetime as _dt
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import typer

from threadloom.checkpoint.leases import LEASE_TOKEN_KEY, pid_space
from threadloom.cli.common import CliError, friendly, parse_json_arg
from threadloom.cli.store import choose_store, require_thread
from threadloom.cli.target import as_graph, load_target
from threadloom.cli.threads import (
    DB,
    PG,
    find_checkpoint,
    opened,
    reading,
)
from threadloom.errors import ThreadBusyError

__all__ = ["delete", "fork", "hold_thread"]


LEASE_S = 60.0  # how long fork/delete hold a thread (their write takes well under that)


_OWNER = f"{socket.gethostname()}:{os.getpid()}:{pid_space()}-cli{uuid.uuid4().hex[:8]}"


@contextmanager
def hold_thread(cp: Any, thread: str, refused: str = "nothing was written") -> Iterator[int | None]:
    """Hold ``thread``'s lease while a command writes it, so that no run starts meanwhile
    (a run waits, then fails with ``ThreadBusyError``). Yields the fencing token (None
    for a checkpointer without leases); the lease is given back on exit.

    Args:
        refused: what the error says was not done, e.g. ``"nothing was deleted"``.

    Raises:
        CliError: a live run (in another process, or elsewhere on PostgreSQL) holds the
            lease; a lease of a process that died on this host does not count.
    """
    if not hasattr(cp, "acquire_lease"):
        yield None
        return
    try:
        token = cp.acquire_lease(thread, _OWNER, LEASE_S)
    except ThreadBusyError as exc:
        raise CliError(f"{exc}; {refused} (wait for the run to end, then try again)") from exc
    try:
        yield token
    finally:
        cp.release_lease(thread, token)


def _fork_direct(cp: Any, saved: Any, update: dict[str, Any],
                 token: int | None) -> dict[str, Any]:
    from threadloom.checkpoint.base import new_checkpoint_id
    from threadloom.messages import convert_to_messages

    ck = copy.copy(saved.checkpoint)
    values = dict(ck["channel_values"])
    versions = dict(ck["channel_versions"])
    top = max(versions.values(), default=0)
    for key, value in update.items():
        if key == "messages":
            new = [m if m.id else m.model_copy(update={"id": str(uuid.uuid4())})
                   for m in convert_to_messages(value)]
            value = list(values.get("messages") or []) + new
        values[key] = value
        versions[key] = top + 1
    ck.update(id=new_checkpoint_id(), channel_values=values, channel_versions=versions,
              ts=_dt.datetime.now(_dt.UTC).isoformat())
    meta = {"source": "fork", "step": int(saved.metadata.get("step", -1)) + 1,
            "writes": {"__fork__": update}, "parents": {}}
    config = saved.config
    if token is not None:  # the write is fenced: refused if the lease was taken meanwhile
        config = {**config, "configurable": {**config["configurable"], LEASE_TOKEN_KEY: token}}
    return cp.put(config, ck, meta, {k: versions[k] for k in update})


@friendly
def fork(thread: str,
         checkpoint: str = typer.Option(..., "--checkpoint", "-c", help="checkpoint to fork"),
         update: str = typer.Option("{}", "--update", "-u", help="JSON state update or @file"),
         graph: str | None = typer.Option(None, "--graph", metavar="MODULE:ATTR",
                                          help="apply the update with the graph's reducers"),
         as_node: str | None = typer.Option(None, "--as-node", help="with --graph: route as "
                                            "if this node wrote the update"),
         db: str | None = DB, postgres: str | None = PG) -> None:
    """Fork a thread from a past checkpoint, with a state update.

    Without --graph each key replaces the stored value; new "messages" are appended.

    With --graph the graph's reducers apply, as in update_state.

    Refused (nothing written) while a live run holds the thread's lease.
    """
    values = parse_json_arg(update, "--update")
    if not isinstance(values, dict):
        raise CliError("--update must be a JSON object of state keys", 2)
    if graph is None and as_node is not None:
        raise CliError("--as-node needs --graph (routing needs the graph)", 2)
    compiled = None if graph is None else as_graph(load_target(graph), None, graph)
    store = choose_store(db, postgres, thread, must_exist=True)
    with opened(store, read_only=True) as reader, reading(thread):
        require_thread(reader, thread, store.looked)
        saved = find_checkpoint(reader, thread, checkpoint)
    _check_update(saved, values, compiled, graph, as_node)
    cid = saved.config["configurable"]["checkpoint_id"]
    refused = "nothing was forked"
    with opened(store, read_only=False) as cp, \
            (nullcontext(None) if compiled is not None else hold_thread(cp, thread, refused)
             ) as token:  # update_state takes the thread's lease itself
        with reading(thread):
            saved = cp.get_tuple(saved.config)
        if saved is None:
            raise CliError(f"checkpoint {cid!r} of thread {thread!r} was removed meanwhile "
                           "(pruned, expired or deleted); nothing was forked")
        if compiled is not None:
            try:
                new = as_graph(compiled, cp, graph).update_state(saved.config, values,
                                                                 as_node=as_node)
            except ThreadBusyError as exc:
                raise CliError(f"{exc}; {refused} (wait for the run to end, then try "
                               "again)") from exc
        else:
            new = _fork_direct(cp, saved, values, token)
    new_id = new["configurable"]["checkpoint_id"]
    typer.echo(f"forked thread {thread} at {cid} -> new checkpoint {new_id} in {store.where}")


def _check_update(saved: Any, values: dict[str, Any], compiled: Any, graph: str | None,
                  as_node: str | None) -> None:
    """Refuse, before anything is written, an update the fork cannot apply: without a
    graph, keys the checkpoint's state does not hold; with one, keys outside its schema
    or an ``--as-node`` that is not one of its nodes.

    Raises:
        CliError: (exit 2) naming the keys or the node.
    """
    from threadloom.engine.writes import writes_of
    from threadloom.errors import InvalidUpdateError
    from threadloom.types import END, START

    if compiled is None:
        known = set(saved.checkpoint["channel_values"])
        unknown = sorted(set(values) - known)
        if unknown:
            raise CliError(
                f"--update names key(s) {unknown} that the thread's state does not hold "
                f"(it holds {sorted(known)}); give --graph MODULE:ATTR so the graph can "
                "check the update against its schema", 2)
        return
    if as_node is not None and as_node not in compiled.nodes and as_node not in (START, END):
        raise CliError(f"--as-node {as_node!r} is not a node of {graph} (its nodes: "
                       f"{sorted(compiled.nodes)})", 2)
    unknown = sorted(set(values) - set(compiled.channels))
    if unknown:
        raise CliError(f"--update names key(s) {unknown} that the state schema of {graph} "
                       f"does not have (its keys: {sorted(compiled.channels)})", 2)
    try:  # what else the graph checks of an update (e.g. RemoveMessage needs add_messages)
        writes_of(compiled, as_node or "__update__", values, 0)
    except InvalidUpdateError as exc:
        raise CliError(f"--update does not fit {graph}: {exc}", 2) from exc


@friendly
def delete(thread: str, db: str | None = DB, postgres: str | None = PG) -> None:
    """Delete a thread and all its checkpoints.

    Refused (nothing deleted) while a live run holds the thread's lease.
    """
    store = choose_store(db, postgres, thread, must_exist=True)
    with opened(store, read_only=True) as reader:
        require_thread(reader, thread, store.looked)
    with opened(store, read_only=False) as cp, \
            hold_thread(cp, thread, "nothing was deleted"):
        cp.delete_thread(thread)
    typer.echo(f"deleted thread {thread} from {store.where}")
