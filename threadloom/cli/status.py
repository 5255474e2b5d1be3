"""A thread's state in words, and what to type next: what ``run``, ``resume`` and ``demo``
say when they cannot act on a thread as asked (a run without ``--input`` on a paused
thread, an answer to a thread with nothing pending, Ctrl-C).

``ThreadState`` is read from a graph's ``StateSnapshot`` (``of_snapshot``: the exact
node of each interrupt) or, without the graph, from the stored checkpoint
(``of_saved``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from threadloom.cli.render import dumps

__all__ = ["ThreadState", "next_command"]

Kind = Literal["unknown", "paused", "failed", "stopped", "finished"]
_SHOWN = 200  # characters of an interrupt's value shown in a message


def _nodes(names: tuple[str, ...]) -> str:
    quoted = ", ".join(repr(n) for n in names)
    return f"node {quoted}" if len(names) == 1 else f"nodes {quoted}"


@dataclasses.dataclass(frozen=True)
class ThreadState:
    """Where a thread is.

    Attributes:
        kind: ``unknown`` (no checkpoint), ``paused`` (waits for an answer to an
            interrupt), ``failed`` (a node raised), ``stopped`` (nodes to run next, no
            question pending: Ctrl-C, ``interrupt_before``), ``finished``.
        nodes: paused: the nodes that asked; failed: the nodes that raised; stopped: the
            nodes that run next.
        asks: the values of the pending interrupts.
        step: the super-step of the latest checkpoint.
    """

    kind: Kind
    nodes: tuple[str, ...] = ()
    asks: tuple[Any, ...] = ()
    step: int | None = None

    @classmethod
    def of_snapshot(cls, snapshot: Any) -> ThreadState:
        """The state a ``StateSnapshot`` (``graph.get_state(...)``) shows."""
        if snapshot.metadata is None:
            return cls("unknown")
        step = snapshot.metadata.get("step")
        if snapshot.interrupts:
            asked = tuple(t.name for t in snapshot.tasks if t.interrupts)
            return cls("paused", asked, tuple(i.value for i in snapshot.interrupts), step)
        failed = tuple(t.name for t in snapshot.tasks if t.error)
        if failed:
            return cls("failed", failed, (), step)
        if snapshot.next:
            return cls("stopped", tuple(snapshot.next), (), step)
        return cls("finished", (), (), step)

    @classmethod
    def of_saved(cls, saved: Any) -> ThreadState:
        """The state a stored ``CheckpointTuple`` shows (or None: ``unknown``), without
        the graph: a paused thread's nodes are those that run next."""
        if saved is None:
            return cls("unknown")
        step = saved.metadata.get("step")
        names = tuple(n if isinstance(n, str) else str(n.get("node"))
                      for n in saved.checkpoint.get("next") or ()
                      if isinstance(n, str | Mapping))
        asks = tuple(i[0] for w in saved.pending_writes if w.channel == "__interrupt__"
                     for i in w.value or ())
        if asks:
            return cls("paused", names, asks, step)
        if any(w.channel == "__error__" for w in saved.pending_writes):
            return cls("failed", names, (), step)
        return cls("stopped" if names else "finished", names, (), step)

    def __str__(self) -> str:
        """The state as a predicate of "thread X ...": ``is paused at node 'review',
        waiting for an answer to {...}``, ``stopped before node 'double' (its run has not
        finished)``, ``finished at step 4``..."""
        if self.kind == "paused":
            asks = "; ".join(dumps(a, indent=None) for a in self.asks)
            if len(asks) > _SHOWN:
                asks = asks[:_SHOWN - 3] + "..."
            return f"is paused at {_nodes(self.nodes)}, waiting for an answer to {asks}"
        if self.kind == "failed":
            return f"failed at {_nodes(self.nodes)} (its run stopped with an error)"
        if self.kind == "stopped":
            return f"stopped before {_nodes(self.nodes)} (its run has not finished)"
        if self.kind == "finished":
            return f"finished at step {self.step}"
        return "has no checkpoint"


def next_command(state: ThreadState, thread: str, db: str, *, demo: bool = False,
                 graph: str | None = None) -> str:
    """What to type next for a thread in ``state``, as ``verb `command```.

    Args:
        state: the thread's state.
        thread: its id.
        db: the ``--db`` flag text to append (``" --db c.db"``, or ``""``).
        demo: the demo made it (answered with ``resume``, continued with ``demo``).
        graph: the ``MODULE:ATTR`` of its graph, when known.
    """
    if demo:
        return {
            "paused": f"answer it with `threadloom resume {thread} --approve{db}` (or "
                      "--reject \"reason\")",
            "failed": f"retry it with `threadloom demo --resume {thread}{db}`",
            "stopped": f"continue it with `threadloom demo --resume {thread}{db}`",
        }.get(state.kind, f"ask a next question with `threadloom demo --resume {thread}{db} "
                          "\"next question\"`")
    target = graph or "MODULE:ATTR"
    return {
        "paused": f"answer it with `threadloom resume {thread} --value JSON --graph {target}"
                  f"{db}`",
        "failed": f"retry it with `threadloom run {target} --thread {thread} --input null"
                  f"{db}`",
        "stopped": f"continue it with `threadloom run {target} --thread {thread} --input "
                   f"null{db}`",
    }.get(state.kind, f"start a new run on it with `threadloom run {target} --thread "
                      f"{thread} --input JSON{db}`")
