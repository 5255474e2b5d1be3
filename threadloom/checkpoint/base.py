"""The checkpointer contract every backend implements.

A checkpointer stores, per ``(thread_id, checkpoint_ns)``, an ordered chain of
checkpoints. A checkpoint is a plain dict (``Checkpoint``) holding the state's channel
values and versions plus what the scheduler must run next; each has an id that sorts by
time, a parent id and metadata (``step``, ``source``, ``writes``, ``parents``).
Pending writes are the writes of tasks that finished in a super-step whose checkpoint
was not yet saved (a sibling failed or interrupted); on resume they are applied instead
of running those tasks again.

The shapes mirror LangGraph's ``BaseCheckpointSaver`` so its users find their way:
``get_tuple``, ``list``, ``put``, ``put_writes``, ``delete_thread`` and the ``a``-prefixed
async twins. Backends implement the sync methods; the async ones default to running the
sync method in a worker thread so the event loop never blocks.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

from threadloom.checkpoint.ids import checkpoint_ts as checkpoint_ts  # re-exported
from threadloom.checkpoint.ids import new_checkpoint_id as new_checkpoint_id
from threadloom.checkpoint.ids import new_checkpoint_id_ts as new_checkpoint_id_ts
from threadloom.errors import CheckpointError
from threadloom.workers import to_worker

CHECKPOINT_FORMAT = 1

# Channels of pending writes that are not state keys.
ERROR = "__error__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
SCHEDULED = "__scheduled__"
FAILED = "__failed__"  # a node failed and its error handler runs: {"type", "message"}
SPECIAL_WRITE_CHANNELS = frozenset({ERROR, INTERRUPT, RESUME, SCHEDULED, FAILED})


class Checkpoint(TypedDict):
    """One saved super-step.

    Keys:
        v: format version (``CHECKPOINT_FORMAT``).
        id: time-sortable id (see ``new_checkpoint_id``).
        ts: ISO-8601 UTC timestamp.
        channel_values: state key -> value (only keys that hold a value).
        channel_versions: state key -> int version; bumped on every write.
        versions_seen: kept for LangGraph's format; threadloom's scheduler routes from
            ``next`` instead and writes ``{}`` here.
        next: the tasks to run in the next super-step: node names, or
            ``{"node": name, "arg": value}`` for ``Send`` packets.
        barriers: join target -> sorted list of sources already finished.
    """

    v: int
    id: str
    ts: str
    channel_values: dict[str, Any]
    channel_versions: dict[str, int]
    versions_seen: dict[str, dict[str, int]]
    next: list[Any]
    barriers: dict[str, list[str]]


class PendingWrite(NamedTuple):
    """A write of one task, saved before its super-step's checkpoint."""

    task_id: str
    channel: str
    value: Any


def shown_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's metadata as a user sees it (``get_state``, history, the
    ``checkpoints``/``debug`` stream): as LangGraph 1.x, without the ``writes`` the
    engine keeps for itself (which keys each node wrote; the store and
    ``CheckpointTuple`` keep it)."""
    if "writes" not in metadata:
        return dict(metadata)
    return {k: v for k, v in metadata.items() if k != "writes"}


class CheckpointTuple(NamedTuple):
    """A checkpoint with its config, metadata, parent and pending writes."""

    config: dict[str, Any]
    checkpoint: Checkpoint
    metadata: dict[str, Any]
    parent_config: dict[str, Any] | None = None
    pending_writes: list[PendingWrite] = []


def thread_config(config: Mapping[str, Any] | None) -> tuple[str, str, str | None]:
    """Read ``(thread_id, checkpoint_ns, checkpoint_id)`` from a run config.

    Raises:
        CheckpointError: when ``thread_id`` is missing, ``None`` or ``""`` (every such run
            would share one thread).
    """
    conf = (config or {}).get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None or thread_id == "":
        got = f" (got thread_id={thread_id!r})" if "thread_id" in conf else ""
        raise CheckpointError(
            "this graph has a checkpointer, so every run needs a thread id: pass "
            f"thread_id='...' or config={{'configurable': {{'thread_id': '...'}}}}{got}"
        )
    if not isinstance(thread_id, str):
        thread_id = str(thread_id)
    return thread_id, conf.get("checkpoint_ns", "") or "", conf.get("checkpoint_id")


def make_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> dict[str, Any]:
    """The config that names one checkpoint."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class BaseCheckpointer:
    """Base class of the checkpointers (memory, SQLite, PostgreSQL).

    Subclasses implement the sync methods below; the async twins run them in a worker
    thread unless a subclass overrides them with native async I/O.
    """

    # -- required -------------------------------------------------------------------------

    def get_tuple(self, config: Mapping[str, Any]) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its ``checkpoint_id``), or the thread's latest.

        Returns None when the thread (or the named checkpoint) does not exist.
        """
        raise NotImplementedError

    def list(
        self,
        config: Mapping[str, Any] | None,
        *,
        filter: Mapping[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints of a thread (and namespace, when the config gives one), newest first.

        Args:
            config: names the thread; ``None`` lists every thread.
            filter: metadata key -> value that each result's metadata must equal.
            before: only checkpoints older than the one this config names.
            limit: at most this many results.
        """
        raise NotImplementedError

    def put(
        self,
        config: Mapping[str, Any],
        checkpoint: Checkpoint,
        metadata: Mapping[str, Any],
        new_versions: Mapping[str, int],
    ) -> dict[str, Any]:
        """Save ``checkpoint`` as the child of the checkpoint ``config`` names.

        Args:
            config: names the thread, namespace and parent checkpoint (may lack an id).
            checkpoint: the checkpoint to save.
            metadata: ``step``, ``source`` and friends.
            new_versions: the channels whose value changed since the parent, with their
                new versions; only those need storing.

        Returns:
            The config naming the saved checkpoint.
        """
        raise NotImplementedError

    def put_writes(
        self,
        config: Mapping[str, Any],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
    ) -> None:
        """Save the writes of task ``task_id`` against the checkpoint ``config`` names.

        Idempotent: saving the same task's writes again replaces nothing already there
        (special channels such as ``__error__`` are overwritten).
        """
        raise NotImplementedError

    def put_with_writes(
        self,
        config: Mapping[str, Any],
        checkpoint: Checkpoint,
        metadata: Mapping[str, Any],
        new_versions: Mapping[str, int],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
    ) -> dict[str, Any]:
        """What a step of one task saves, as LangGraph does: the task's ``writes``
        against the checkpoint ``config`` names (``put_writes``), then ``checkpoint`` as
        its child (``put``). This default makes the two calls; the built-in
        checkpointers make both in one transaction.

        Returns:
            The config naming the saved checkpoint.
        """
        self.put_writes(config, writes, task_id)
        return self.put(config, checkpoint, metadata, new_versions)

    def put_with_own_writes(
        self, config: Mapping[str, Any], checkpoint: Checkpoint, metadata: Mapping[str, Any],
        new_versions: Mapping[str, int], writes: Sequence[tuple[str, Any]], task_id: str,
    ) -> dict[str, Any]:
        """An input checkpoint and its START task's ``writes`` (``task_id``) against it:
        ``put``, then ``put_writes`` with the config it returned, as LangGraph saves them.
        This default makes the two calls; the built-in checkpointers make both in one
        transaction (a crash never leaves the checkpoint without its input).

        Returns:
            The config naming the saved checkpoint.
        """
        saved = self.put(config, checkpoint, metadata, new_versions)
        self.put_writes(saved, writes, task_id)
        return saved

    def get_next_version(self, current: int | None, channel: None = None) -> int:
        """The version a state key gets when written, after ``current`` (None: never
        written), as LangGraph's ``BaseCheckpointSaver.get_next_version``: ``current + 1``.
        The engine calls a checkpointer's own override of it for every bump (must return
        an int greater than ``current``); the default is inlined on the fast path."""
        return (current or 0) + 1

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread, in every namespace."""
        raise NotImplementedError

    # -- optional, with defaults ----------------------------------------------------------

    def list_threads(self) -> builtins.list[str]:
        """Every thread id that has at least one checkpoint, sorted."""
        return sorted({t.config["configurable"]["thread_id"] for t in self.list(None)})

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        """Keep only the ``keep_last`` newest checkpoints of each namespace of a thread.

        A checkpoint that a pending interrupt needs is always kept.

        Returns:
            How many checkpoints were deleted.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release connections and files. The checkpointer cannot be used afterwards."""

    # -- async twins ----------------------------------------------------------------------

    async def aget_tuple(self, config: Mapping[str, Any]) -> CheckpointTuple | None:
        """Async ``get_tuple``."""
        return await to_worker(self.get_tuple, config)

    async def alist(
        self,
        config: Mapping[str, Any] | None,
        *,
        filter: Mapping[str, Any] | None = None,  # noqa: A002
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``."""
        items = await to_worker(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: Mapping[str, Any],
        checkpoint: Checkpoint,
        metadata: Mapping[str, Any],
        new_versions: Mapping[str, int],
    ) -> dict[str, Any]:
        """Async ``put``."""
        return await to_worker(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Mapping[str, Any], writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        """Async ``put_writes``."""
        await to_worker(self.put_writes, config, writes, task_id)

    async def aput_with_writes(
        self, config: Mapping[str, Any], checkpoint: Checkpoint, metadata: Mapping[str, Any],
        new_versions: Mapping[str, int], writes: Sequence[tuple[str, Any]], task_id: str,
    ) -> dict[str, Any]:
        """Async ``put_with_writes``."""
        return await to_worker(self.put_with_writes, config, checkpoint, metadata,
                               new_versions, writes, task_id)

    async def aput_with_own_writes(
        self, config: Mapping[str, Any], checkpoint: Checkpoint, metadata: Mapping[str, Any],
        new_versions: Mapping[str, int], writes: Sequence[tuple[str, Any]], task_id: str,
    ) -> dict[str, Any]:
        """Async ``put_with_own_writes``."""
        return await to_worker(self.put_with_own_writes, config, checkpoint, metadata,
                               new_versions, writes, task_id)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``."""
        await to_worker(self.delete_thread, thread_id)

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        """Async ``prune``."""
        return await to_worker(self.prune, thread_id, keep_last=keep_last)

    async def aclose(self) -> None:
        """Async ``close``."""
        await to_worker(self.close)

    def __enter__(self) -> BaseCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.cache
def _fuses(kind: type, fused: str = "put_with_writes") -> bool:
    owner = next((k for k in kind.__mro__ if fused in k.__dict__), None)
    if owner is None:
        return False
    for name in ("put", "aput", "put_writes", "aput_writes"):
        defining = next(k for k in kind.__mro__ if name in k.__dict__)
        if defining is not owner and issubclass(defining, owner):
            return False  # a subclass overrides it below the fused save
    return True


def fuses_writes(cp: Any) -> bool:
    """Whether the engine may save a step's checkpoint and its lone task's writes with
    ``put_with_writes``: the checkpointer has it, and no subclass overrides ``put``,
    ``aput``, ``put_writes`` or ``aput_writes`` below it (an override must be called,
    as LangGraph calls them)."""
    return _fuses(type(cp))  # type: ignore[arg-type]


def fuses_own_writes(cp: Any) -> bool:
    """``fuses_writes`` for ``put_with_own_writes`` (an input checkpoint and its writes)."""
    return _fuses(type(cp), "put_with_own_writes")  # type: ignore[arg-type]
