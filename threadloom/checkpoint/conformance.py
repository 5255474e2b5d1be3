"""The checkpointer conformance suite: every backend, the in-memory one included, runs it.

Usage from a test module::

    from threadloom.checkpoint.conformance import CHECKS, Backend

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
    def test_conformance(check, backend):   # backend: a Backend fixture
        check(backend)

or ``run_conformance(backend)`` to run them all. A check raises ``ConformanceError`` (an
``AssertionError``) naming what differed. The codec and security checks (types surviving
a new instance, forged rows, injection payloads) live in ``conformance_safety`` and are
part of ``CHECKS``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from threadloom.checkpoint.base import Checkpoint, CheckpointTuple, new_checkpoint_id
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.stored import StoredCheckpointer
from threadloom.errors import ThreadBusyError


class ConformanceError(AssertionError):
    """A backend broke the checkpointer contract."""


@dataclass
class Backend:
    """How the suite gets checkpointers of one kind.

    Attributes:
        name: shown in failures.
        make: ``make(**options) -> checkpointer`` on an EMPTY store; options are the
            ``StoredCheckpointer`` keywords (``keep_latest``, ``ttl_seconds``, ``codec``).
        reopen: ``reopen(cp, codec) -> checkpointer``: a new instance over the same
            stored data (a new process would see the same), using ``codec``.
    """

    name: str
    make: Callable[..., StoredCheckpointer]
    reopen: Callable[[StoredCheckpointer, Codec], StoredCheckpointer]


def expect(cond: Any, msg: str) -> None:
    """Raise ``ConformanceError(msg)`` unless ``cond`` holds (no ``assert``: runs under -O)."""
    if not cond:
        raise ConformanceError(msg)


def cfg(thread_id: str, ns: str | None = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    """A run config naming a thread (and namespace / checkpoint)."""
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def make_checkpoint(values: dict[str, Any], versions: dict[str, int]) -> Checkpoint:
    """A checkpoint holding ``values`` at ``versions``."""
    return {
        "v": 1,
        "id": new_checkpoint_id(),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": dict(values),
        "channel_versions": dict(versions),
        "versions_seen": {"node": dict(versions)},
        "next": ["node"],
        "barriers": {},
    }


class Writer:
    """Appends checkpoints to one thread the way the engine does (bumping versions)."""

    def __init__(self, cp: StoredCheckpointer, thread_id: str, ns: str = "") -> None:
        self.cp, self.config = cp, cfg(thread_id, ns)
        self.values: dict[str, Any] = {}
        self.versions: dict[str, int] = {}
        self.step = -1
        self.token: int | None = None

    def put(self, source: str = "loop", **changes: Any) -> dict[str, Any]:
        """Save a child of the last checkpoint with ``changes`` applied; returns its config."""
        self.step += 1
        for key, value in changes.items():
            self.values[key] = value
            self.versions[key] = self.versions.get(key, 0) + 1
        ck = make_checkpoint(self.values, self.versions)
        meta = {"step": self.step, "source": source, "writes": {"node": changes}, "parents": {}}
        new = {k: self.versions[k] for k in changes}
        self.config = self.cp.put(self._config(), ck, meta, new)
        return self.config

    def _config(self) -> dict[str, Any]:
        conf = dict(self.config["configurable"])
        conf.pop("__lease_token", None)  # put() hands back the token it was given
        if self.token is not None:
            conf["__lease_token"] = self.token
        return {"configurable": conf}


def tuple_at(cp: StoredCheckpointer, config: dict[str, Any]) -> CheckpointTuple:
    """``cp.get_tuple(config)``; raises ``ConformanceError`` when there is no checkpoint."""
    found = cp.get_tuple(config)
    if found is None:
        raise ConformanceError(f"no checkpoint for {config}")
    return found


def values_at(cp: StoredCheckpointer, config: dict[str, Any]) -> dict[str, Any]:
    """The channel values of the checkpoint ``config`` names."""
    return tuple_at(cp, config).checkpoint["channel_values"]


# -- checks --------------------------------------------------------------------------------


def check_put_get(b: Backend) -> None:
    """put/get_tuple: latest, by id, parent config, metadata, unknown ids."""
    cp = b.make()
    w = Writer(cp, "t1")
    c1 = w.put(source="input", x=1, items=["a"])
    c2 = w.put(x=2)
    latest = tuple_at(cp, cfg("t1"))
    expect(latest.config == c2, f"latest is {latest.config}")
    expect(latest.checkpoint["channel_values"] == {"x": 2, "items": ["a"]}, "values differ")
    expect(latest.checkpoint["channel_versions"] == {"x": 2, "items": 1}, "versions differ")
    expect(latest.checkpoint["next"] == ["node"], "next lost")
    expect(latest.parent_config == c1, f"parent is {latest.parent_config}")
    expect(latest.metadata["step"] == 1 and latest.metadata["source"] == "loop", "metadata")
    first = tuple_at(cp, c1)
    expect(first.checkpoint["channel_values"]["x"] == 1, "by id")
    expect(first.metadata["writes"] == {"node": {"x": 1, "items": ["a"]}}, "metadata writes")
    expect(first.parent_config is None, "first checkpoint has a parent")
    expect(cp.get_tuple(cfg("t1", checkpoint_id="0" * 32)) is None, "unknown id found")
    expect(cp.get_tuple(cfg("nope")) is None, "unknown thread found")
    got = asyncio.run(cp.aget_tuple(cfg("t1")))
    expect(got is not None and got.config == c2, "aget_tuple differs")


def check_list(b: Backend) -> None:
    """list: newest first, metadata filters, before, limit, every thread."""
    cp = b.make()
    w = Writer(cp, "t1")
    configs = [w.put(source="input" if i == 0 else "loop", x=i) for i in range(5)]
    Writer(cp, "t2").put(x=9)
    ids = [c["configurable"]["checkpoint_id"] for c in configs]
    got = [t.config["configurable"]["checkpoint_id"] for t in cp.list(cfg("t1"))]
    expect(got == ids[::-1], f"list order {got}")
    only = list(cp.list(cfg("t1"), filter={"source": "input"}))
    expect([t.metadata["step"] for t in only] == [0], "filter source")
    expect([t.metadata["step"] for t in cp.list(cfg("t1"), filter={"step": 3})] == [3], "step")
    expect(list(cp.list(cfg("t1"), filter={"missing": None})) == [], "missing key matched")
    before = [t.metadata["step"] for t in cp.list(cfg("t1"), before=configs[3])]
    expect(before == [2, 1, 0], f"before gave {before}")
    expect([t.metadata["step"] for t in cp.list(cfg("t1"), limit=2)] == [4, 3], "limit")
    limited = cp.list(cfg("t1"), filter={"source": "loop"}, limit=2)
    expect([t.metadata["step"] for t in limited] == [4, 3], "filter + limit")
    expect(list(cp.list(cfg("t1"), limit=0)) == [], "limit 0")
    expect(len(list(cp.list(None))) == 6, "list(None) covers every thread")

    async def collect() -> list[Any]:
        return [t async for t in cp.alist(cfg("t1"), limit=1)]

    expect(len(asyncio.run(collect())) == 1, "alist")


def check_pending_writes(b: Backend) -> None:
    """put_writes: idempotent per (task, idx), special channels overwritten, per checkpoint."""
    cp = b.make()
    w = Writer(cp, "t1")
    c1 = w.put(x=1)
    cp.put_writes(c1, [("x", 10), ("y", "a")], "task-a")
    cp.put_writes(c1, [("x", 99), ("y", "b")], "task-a")  # a replay: ignored
    cp.put_writes(c1, [("__error__", "boom")], "task-b")
    cp.put_writes(c1, [("__error__", "boom again")], "task-b")  # special: overwritten
    writes = tuple_at(cp, c1).pending_writes
    got = [(pw.task_id, pw.channel, pw.value) for pw in writes]
    want = [("task-a", "x", 10), ("task-a", "y", "a"), ("task-b", "__error__", "boom again")]
    expect(got == want, f"pending writes {got}")
    c2 = w.put(x=2)
    expect(tuple_at(cp, c2).pending_writes == [], "a new checkpoint starts with no writes")
    expect(len(tuple_at(cp, c1).pending_writes) == 3, "old checkpoint lost its writes")


def check_namespaces(b: Backend) -> None:
    """checkpoint_ns isolation, listing every namespace, delete_thread across namespaces."""
    cp = b.make()
    Writer(cp, "t1").put(x="root")
    sub = Writer(cp, "t1", ns="child:1")
    sub.put(x="child")
    sub.put(x="child2")
    expect(values_at(cp, cfg("t1")) == {"x": "root"}, "root namespace mixed with child")
    expect(values_at(cp, cfg("t1", "child:1")) == {"x": "child2"}, "child namespace")
    expect(len(list(cp.list(cfg("t1", "child:1")))) == 2, "list one namespace")
    expect(len(list(cp.list(cfg("t1", ns=None)))) == 3, "list all namespaces")
    cp.delete_thread("t1")
    expect(cp.get_tuple(cfg("t1", "child:1")) is None, "delete_thread left a namespace")


def check_threads(b: Backend) -> None:
    """list_threads and delete_thread leave other threads alone."""
    cp = b.make()
    for t in ("b", "a", "c"):
        Writer(cp, t).put(x=t)
    expect(cp.list_threads() == ["a", "b", "c"], f"threads {cp.list_threads()}")
    cp.delete_thread("b")
    expect(cp.list_threads() == ["a", "c"], "delete_thread")
    expect(values_at(cp, cfg("c")) == {"x": "c"}, "other thread damaged")
    asyncio.run(cp.adelete_thread("a"))
    expect(cp.list_threads() == ["c"], "adelete_thread")


def check_prune(b: Backend) -> None:
    """prune keeps the newest N, a paused fork, and every blob they need."""
    cp = b.make()
    w = Writer(cp, "t1")
    items: list[Any] = []
    for i in range(20):
        items = items + [f"m{i}"]
        w.put(items=items, n=i)
        if i == 9:  # fork from step 4, paused at an interrupt
            step4 = list(cp.list(cfg("t1"), filter={"step": 4}))[0]
            paused = Writer(cp, "t1")
            paused.config = step4.config
            paused.values = dict(step4.checkpoint["channel_values"])
            paused.versions = dict(step4.checkpoint["channel_versions"])
            fork = paused.put(items=paused.values["items"] + ["fork"])
            cp.put_writes(fork, [("__interrupt__", {"value": "ask"})], "task")
    latest = w.put(items=items + ["last"])
    before = [(t.config, t.checkpoint["channel_values"]) for t in cp.list(cfg("t1"), limit=3)]
    deleted = cp.prune("t1", keep_last=3)
    expect(deleted == 18, f"prune deleted {deleted}")
    cp.clear_caches()
    after = [(t.config, t.checkpoint["channel_values"]) for t in cp.list(cfg("t1"))]
    expect(after[:3] == before, "state after pruning differs")
    expect(len(after) == 4, f"{len(after)} checkpoints kept")
    expect(values_at(cp, fork)["items"] == [f"m{i}" for i in range(5)] + ["fork"], "fork lost")
    expect(values_at(cp, cfg("t1")) == values_at(cp, latest), "latest")
    try:
        cp.prune("t1", keep_last=0)
    except ValueError:
        pass
    else:
        raise ConformanceError("prune(keep_last=0) must raise ValueError")


def check_keep_latest(b: Backend) -> None:
    """keep_latest bounds the rows and keeps the state loadable."""
    cp = b.make(keep_latest=3)
    w = Writer(cp, "t1")
    items: list[Any] = []
    for i in range(60):
        items = items + [i]
        w.put(items=items)
    expect(len(list(cp.list(cfg("t1")))) == 3, "keep_latest not applied")
    cp.clear_caches()
    expect(values_at(cp, cfg("t1"))["items"] == list(range(60)), "state lost by pruning")


def check_ttl(b: Backend) -> None:
    """Per-thread and default TTL: expired threads vanish on access and by sweep()."""
    cp = b.make()
    Writer(cp, "short").put(x=1)
    Writer(cp, "long").put(x=1)
    cp.set_ttl("short", 0.05)
    cp.set_ttl("long", 60)
    time.sleep(0.1)
    expect(cp.get_tuple(cfg("short")) is None, "expired thread still readable")
    expect(cp.list_threads() == ["long"], f"threads {cp.list_threads()}")
    cp2 = b.make(ttl_seconds=0.05)
    Writer(cp2, "a").put(x=1)
    Writer(cp2, "b").put(x=1)
    cp2.set_ttl("b", None)
    time.sleep(0.1)
    expect(cp2.sweep() == 1 and cp2.list_threads() == ["b"], "default TTL / sweep")


def check_deltas(b: Backend) -> None:
    """Appending 100 times: every version loads equal, and bytes stay linear."""
    cp = b.make()
    w = Writer(cp, "t1")
    items: list[Any] = []
    configs = []
    for i in range(100):
        items = items + [{"i": i, "text": "x" * 50}] * (1 + i % 3)
        configs.append((w.put(items=items), list(items)))
    cp.clear_caches()
    for config, want in configs[::7] + configs[-1:]:
        expect(values_at(cp, config)["items"] == want, "delta chain rebuilt wrong")
    with cp._tx(False) as tx:
        index = tx.blob_index("t1", "")
        total = sum(len(r.data) for r in tx.fetch_blobs("t1", "", list(index)).values())
    final = len(cp.codec.dumps(items))
    expect(total < 4 * final, f"stored {total} bytes for a {final}-byte list: not linear")


def check_forks(b: Backend) -> None:
    """Two forks that reach the same channel version never mix values."""
    cp = b.make()
    w = Writer(cp, "t1")
    base = w.put(items=["a"])
    branches = {}
    for tag in ("left", "right"):
        fork = Writer(cp, "t1")
        fork.config, fork.values, fork.versions = base, {"items": ["a"]}, {"items": 1}
        branches[tag] = fork.put(items=["a", tag])
        branches[tag + "2"] = fork.put(items=["a", tag, tag + "2"])
    for fresh in (False, True):
        if fresh:
            cp.clear_caches()
        for tag, config in branches.items():
            got = values_at(cp, config)["items"]
            want = ["a", tag.rstrip("2")] + ([tag] if tag.endswith("2") else [])
            expect(got == want, f"fork {tag} loaded {got}")


def check_leases(b: Backend) -> None:
    """Leases: one holder, fencing tokens refuse stale writers, release."""
    cp = b.make()
    w = Writer(cp, "t1")
    w.put(x=0)
    tok1 = cp.acquire_lease("t1", "worker-1", ttl_s=0.2)
    try:
        cp.acquire_lease("t1", "worker-2", ttl_s=5)
        raise ConformanceError("a second owner took a held lease")
    except ThreadBusyError as exc:
        expect(exc.thread_id == "t1", "ThreadBusyError.thread_id")
    w.token = tok1
    w.put(x=1)
    expect(
        w.config["configurable"].get("__lease_token") == tok1,
        "put must return a config that keeps the caller's lease token (the run's next "
        "writes are made with it and must stay fenced)",
    )
    time.sleep(0.25)
    tok2 = cp.acquire_lease("t1", "worker-2", ttl_s=5)
    expect(tok2 > tok1, "fencing tokens must grow")
    for attempt in (lambda: w.put(x=2), lambda: cp.put_writes(w._config(), [("x", 3)], "t")):
        try:
            attempt()
            raise ConformanceError("a stale lease token was allowed to write")
        except ThreadBusyError:
            pass
    expect(values_at(cp, cfg("t1")) == {"x": 1}, "stale writer changed the thread")
    cp.release_lease("t1", tok1)  # stale release: ignored
    try:
        cp.acquire_lease("t1", "worker-3", ttl_s=5)
        raise ConformanceError("a stale release freed the lease")
    except ThreadBusyError:
        pass
    cp.release_lease("t1", tok2)
    tok3 = cp.acquire_lease("t1", "worker-3", ttl_s=5)
    expect(tok3 > tok2, "token after release")
    w.token = None
    w.put(x=4)  # writers without a token are not fenced
    expect(values_at(cp, cfg("t1")) == {"x": 4}, "unfenced write")


def run_conformance(backend: Backend) -> None:
    """Run every check in ``CHECKS`` against ``backend``; raises on the first failure."""
    for check in CHECKS:
        check(backend)


CORE_CHECKS: list[Callable[[Backend], None]] = [
    check_put_get,
    check_list,
    check_pending_writes,
    check_namespaces,
    check_threads,
    check_prune,
    check_keep_latest,
    check_ttl,
    check_deltas,
    check_forks,
    check_leases,
]


def _all_checks() -> list[Callable[[Backend], None]]:
    from threadloom.checkpoint.conformance_safety import SAFETY_CHECKS

    return CORE_CHECKS + SAFETY_CHECKS


CHECKS = _all_checks()
