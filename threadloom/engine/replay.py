"""Time travel with subgraphs: where each level of a replayed run starts, as LangGraph.

A subgraph's checkpoints record, in their metadata's ``parents``, the checkpoint each
enclosing graph stood at when it saved (namespace -> checkpoint id, the root's under
``""``). The config of such a checkpoint, as ``get_state``, history and ``update_state``
give it, carries that map as ``configurable["checkpoint_map"]``, plus its own entry.

Invoking the root graph with such a config runs the *root* from the checkpoint the map
names for it, and each subgraph the map names continues from its own checkpoint there
(replaying it, or answering its question with ``Command(resume=...)``). As in LangGraph
the map names namespaces exactly: a subgraph called again in the same run (a loop) in a
namespace the map names (a ``checkpointer=True`` one keeps its namespace from call to
call) starts from the named checkpoint again, with its new input; a per-call namespace
(``node:task_id``) is named only while the parent's task ids stay those of the run that
saved it (a resume; a replay forks first, so its tasks have new ids and its per-call
subgraphs start anew, with no saved state).

A replay of a checkpoint also shares one ``Travel`` with every subgraph it runs: a
subgraph the config does not name (a stateful one, ``checkpointer=True``, keeps a history
across calls) loads, the first time the replay reaches it, its newest checkpoint older
than the replayed one (what it held then), not what a later run left there; when the
replay calls it again (a loop), it loads its latest as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.types import Command

if TYPE_CHECKING:
    from threadloom.checkpoint.base import CheckpointTuple
    from threadloom.engine.scheduler import RunLoop

MAP = "checkpoint_map"


class Travel:
    """What one time-travelling run shares with the subgraphs it runs.

    Attributes:
        targets: namespace -> the checkpoint the config names for that subgraph.
        before: the replayed root checkpoint's id (a stateful subgraph loads its newest
            checkpoint older than it), or None when the run does not replay.
        visited: the namespaces (task ids left out) the run has entered already.
    """

    __slots__ = ("before", "targets", "visited")

    def __init__(self, targets: dict[str, str]) -> None:
        self.targets = targets
        self.before: str | None = None
        self.visited: set[str] = set()


def with_checkpoint_map(
    config: dict[str, Any] | None, metadata: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``config`` of a subgraph's checkpoint with its ``checkpoint_map``: its parents'
    checkpoints and its own (a root checkpoint's config is returned as it is)."""
    parents = metadata.get("parents") if metadata else None
    if not parents or config is None:
        return config
    conf = config.get("configurable") or {}
    if "checkpoint_id" not in conf:
        return config
    own = {conf.get("checkpoint_ns", ""): conf["checkpoint_id"]}
    return {**config, "configurable": {**conf, MAP: {**parents, **own}}}


def root_config(cfg: dict[str, Any]) -> tuple[dict[str, Any], Travel | None]:
    """The config a run of the root graph starts from, and its ``Travel``.

    A config naming a subgraph's namespace runs the root graph: from the checkpoint its
    ``checkpoint_map`` names for the root, else the thread's latest.
    """
    conf = cfg.get("configurable") or {}
    targets = conf.get(MAP)
    if not conf.get("checkpoint_ns") and not targets:
        return cfg, None
    conf = {k: v for k, v in conf.items() if k != MAP}
    if conf.get("checkpoint_ns"):  # a subgraph's checkpoint id: not the root's
        conf.pop("checkpoint_id", None)
        conf["checkpoint_ns"] = ""
    travel = None
    if isinstance(targets, dict) and targets:
        if targets.get(""):
            conf["checkpoint_id"] = targets[""]
        travel = Travel({k: v for k, v in targets.items() if k})
    return {**cfg, "configurable": conf}, travel


def stable(ns: str) -> str:
    """A namespace without its task ids (``"a:1|b:2"`` -> ``"a|b"``): a subgraph's place
    in the graph, the same in a replay as in the run it replays."""
    return "|".join(level.split(":", 1)[0] for level in ns.split("|"))


def begin(loop: RunLoop, input: Any, saved: CheckpointTuple | None) -> None:
    """Give a root run that replays a checkpoint (the config names one; not a resume)
    its ``Travel``'s replay bound: the checkpoint, or for a fork (an ``update_state``,
    whose subgraphs saved nothing since) the checkpoint it was forked from."""
    if loop.namespace or saved is None or not loop.config_id():
        return
    if isinstance(input, Command) and input.resume is not None:
        return
    before = saved.checkpoint["id"]
    if saved.metadata.get("source") in ("update", "fork") and saved.parent_config:
        before = saved.parent_config["configurable"].get("checkpoint_id") or before
    if loop.travel is None:
        loop.travel = Travel({})
    loop.travel.before = before


async def place(loop: RunLoop, fresh_input: bool) -> bool:
    """Point a subgraph's run at where the replay finds it, the first time the run
    enters its namespace. Returns True when the config names this subgraph's checkpoint
    (it continues from there); else, with ``fresh_input`` (it starts from the parent's
    input), it loads its newest checkpoint older than the replayed one, or none."""
    travel = loop.travel
    if travel is None or loop.cp is None:
        return False
    ns = "|".join(loop.namespace)
    seen = ns.rsplit(":", 1)[0]
    first = seen not in travel.visited
    travel.visited.add(seen)
    target = travel.targets.get(ns)
    if target is not None:  # every call in this namespace starts there (see the module)
        _at(loop, target)
        return first
    if not first or travel.before is None or not fresh_input:
        return False
    bound = {"configurable": {**loop.config["configurable"], "checkpoint_id": travel.before}}
    cp = loop.cp
    if loop.blocking_ok or getattr(cp, "inline_io", False):
        older = list(cp.list(loop.config, before=bound, limit=1))
    else:
        older = [t async for t in cp.alist(loop.config, before=bound, limit=1)]
    if older:
        _at(loop, older[0].config["configurable"]["checkpoint_id"])
    else:
        loop.fresh = True  # it had no state yet then: it starts anew
    return False


def _at(loop: RunLoop, checkpoint_id: str) -> None:
    conf = {**loop.config["configurable"], "checkpoint_id": checkpoint_id}
    loop.config = {**loop.config, "configurable": conf}
    loop.checkpoint_config = loop.config


def graph_at(graph: Any, config: dict[str, Any]) -> Any:
    """The subgraph whose checkpoints ``config``'s namespace holds (the graph itself for
    the root's, or for a graph invoked inside a node, which the graph does not know)."""
    ns = (config.get("configurable") or {}).get("checkpoint_ns")
    if not ns:
        return graph
    found = graph
    for level in stable(ns).split("|"):
        child = getattr(getattr(found, "nodes", {}).get(level), "subgraph", None)
        if child is None:
            return graph
        found = child
    return found

