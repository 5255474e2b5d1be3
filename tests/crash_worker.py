"""Graphs run in a child process by the crash, load and idempotency tests.

Run as ``python tests/crash_worker.py '<json job>'``; the job names the graph, the
backend (``{"kind": "sqlite", "path": ...}`` or ``{"kind": "postgres", "conninfo": ...,
"schema": ...}``), the thread id, the input (``null`` resumes the thread) and the files
where nodes record their side effects. The final state goes to ``job["result"]`` as
JSON. The parent SIGKILLs the child whenever it likes: every side effect is one
``O_APPEND`` write, so it survives the kill.

The tests import this module too, to build the same graphs in process.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from threadloom import END, START, AIMessage, HumanMessage, StateGraph, add_messages
from threadloom.messages import ToolMessage, message_to_dict
from threadloom.nodes import ToolNode, tools_condition
from threadloom.tools import InjectedIdempotencyKey, tool

FAST = ("fast_a", "fast_b")


def record(path: str | None, line: str) -> None:
    """Append one line to ``path`` in a single ``write`` (atomic for short lines)."""
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def lines(path: str | Path) -> list[str]:
    """The recorded lines of ``path`` ([] when it does not exist)."""
    p = Path(path)
    return p.read_text().splitlines() if p.exists() else []


class ParallelState(TypedDict):
    messages: Annotated[list, add_messages]
    done: Annotated[list, operator.add]


def parallel_graph(effects: str | None, markers: str | None, slow_s: float) -> StateGraph:
    """plan -> (fast_a | fast_b | slow) -> join: a step of three tasks, one of them slow.

    Every node records ``"<node>"`` in ``effects`` when it completes; the fast ones also
    touch ``<markers>.<node>``; ``slow`` records ``"slow-start"`` and then sleeps ``slow_s``.
    """

    def node(name: str, sleep: float = 0.0) -> Any:
        def run(state: ParallelState) -> dict[str, Any]:
            if name == "slow":
                record(effects, "slow-start")
            time.sleep(sleep)
            record(effects, name)
            if markers and name in FAST:
                Path(f"{markers}.{name}").touch()
            return {"messages": [AIMessage(f"{name} saw {len(state['messages'])}")],
                    "done": [name]}

        return run

    g = StateGraph(ParallelState)
    g.add_node("plan", node("plan"))
    for name in FAST:
        g.add_node(name, node(name, 0.01))
    g.add_node("slow", node("slow", slow_s))
    g.add_node("join", node("join"))
    g.add_edge(START, "plan")
    for name in (*FAST, "slow"):
        g.add_edge("plan", name)
    g.add_edge([*FAST, "slow"], "join")
    g.add_edge("join", END)
    return g


class LoopState(TypedDict):
    messages: Annotated[list, add_messages]
    n: int


def loop_graph(effects: str | None, turns: int, delay_s: float) -> StateGraph:
    """One node ``step`` looping ``turns`` times; each pass adds one message."""

    def step(state: LoopState) -> dict[str, Any]:
        n = state["n"] + 1
        time.sleep(delay_s)
        record(effects, f"step {n}")
        return {"n": n, "messages": [AIMessage(f"step {n}")]}

    g = StateGraph(LoopState)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: "step" if s["n"] < turns else END)
    return g


CALLS = [("call_a", 5), ("call_b", 7)]


def tools_graph(effects: str, ledger: str, slow_s: float) -> StateGraph:
    """agent -> tools -> agent: one AI message with two ``charge`` calls.

    ``charge`` records ``"attempt <key>"`` in ``effects`` and books ``"<key> <amount>"``
    in ``ledger`` unless that key is booked already (the deduplicating external system);
    the 7-unit call then sleeps ``slow_s`` seconds, after booking.
    """
    @tool
    def charge(amount: int, key: Annotated[str, InjectedIdempotencyKey]) -> str:
        """Charge the customer.

        Args:
            amount: how much, in cents.
        """
        record(effects, f"attempt {key}")
        if not any(line.split()[0] == key for line in lines(ledger)):
            record(ledger, f"{key} {amount}")
        if amount == 7:
            time.sleep(slow_s)
        return f"charged {amount}"

    def agent(state: ParallelState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("done")]}
        calls = [{"name": "charge", "args": {"amount": a}, "id": i} for i, a in CALLS]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    return tool_loop(ParallelState, agent, [charge])


def tool_loop(schema: Any, agent: Any, tools: list[Any]) -> StateGraph:
    """``agent`` <-> ``tools`` over ``schema``, as a prebuilt ReAct loop wires them."""
    g = StateGraph(schema)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g


def open_backend(spec: dict[str, Any]) -> Any:
    """The checkpointer a job's ``backend`` names."""
    if spec["kind"] == "sqlite":
        from threadloom.checkpoint.sqlite import SqliteCheckpointer

        return SqliteCheckpointer(spec["path"])
    from threadloom.checkpoint.postgres import PostgresCheckpointer

    return PostgresCheckpointer(spec["conninfo"], schema=spec["schema"], pool_size=2)


def spawn(job: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start this script on ``job`` in a new Python process."""
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), json.dumps(job)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def run_job(job: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    """Run ``job`` in a new process to its end; returns the final state it wrote.

    Raises:
        RuntimeError: the child failed (its stderr is in the message).
    """
    proc = spawn(job)
    _, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"child exited {proc.returncode}: {err.decode()[-3000:]}")
    return json.loads(Path(job["result"]).read_text()) if job.get("result") else {}


def wait_until(cond: Any, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Poll ``cond()`` every 5 ms until true; fail if ``proc`` ends or time runs out."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            raise RuntimeError(f"child ended early ({proc.returncode}): "
                               f"{proc.stderr.read().decode()[-3000:] if proc.stderr else ''}")
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError("the child never reached the expected point")
        time.sleep(0.005)


def kill9(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and reap it."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def chain_ids(cp: Any, thread_id: str) -> list[str]:
    """The thread's checkpoint ids, oldest first, after checking they form one chain.

    Raises:
        AssertionError: a checkpoint's parent is not the one saved just before it.
    """
    rows = list(cp.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}))
    ids = [r.config["configurable"]["checkpoint_id"] for r in rows]
    if ids != sorted(ids, reverse=True):
        raise AssertionError(f"list() is not newest first: {ids}")
    parents = [(r.parent_config or {}).get("configurable", {}).get("checkpoint_id")
               for r in rows]
    if parents != [*ids[1:], None]:
        raise AssertionError(f"broken chain: ids {ids} parents {parents}")
    return ids[::-1]


def plain(values: dict[str, Any]) -> dict[str, Any]:
    """A state as JSON-able data, message ids dropped (they are random per run)."""
    out = dict(values)
    out["messages"] = [
        {k: v for k, v in message_to_dict(m).items() if k != "id"} for m in values["messages"]
    ]
    return out


def build(job: dict[str, Any]) -> StateGraph:
    """The graph a job names."""
    if job["graph"] == "parallel":
        return parallel_graph(job.get("effects"), job.get("markers"), job.get("slow_s", 0.0))
    if job["graph"] == "loop":
        return loop_graph(job.get("effects"), job["turns"], job.get("delay_s", 0.0))
    if job["graph"] == "tools":
        return tools_graph(job["effects"], job["ledger"], job.get("slow_s", 0.0))
    raise ValueError(f"unknown graph {job['graph']!r}")


def main(job: dict[str, Any]) -> None:
    """Run (or resume) the job's thread and write its final state to ``job["result"]``."""
    cp = open_backend(job["backend"])
    app = build(job).compile(checkpointer=cp, durability=job.get("durability", "sync"),
                             busy_timeout=job.get("busy_timeout", 0.0))
    inp = job["input"]
    if inp is not None:
        inp = {**inp, "messages": [HumanMessage(m) for m in inp.get("messages", [])]}
    kwargs = {"thread_id": job["thread_id"], "recursion_limit": job.get("recursion_limit", 25)}
    if job.get("use_async"):
        out = asyncio.run(app.ainvoke(inp, **kwargs))
    else:
        out = app.invoke(inp, **kwargs)
    cp.close()
    if job.get("result"):
        Path(job["result"]).write_text(json.dumps(plain(out)))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(json.loads(sys.argv[1]))


def chat_graph() -> StateGraph:
    """One node that answers each user message with ``"echo <text>"``."""

    def reply(state: ParallelState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]}

    g = StateGraph(ParallelState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    return g


def load_worker(spec: dict[str, Any], worker: int, threads: list[str], turns: int,
                busy_timeout: float, go: Any, out: Any) -> None:
    """Run ``turns`` turns on each of ``threads`` (round robin, starting at an offset per
    worker), after ``go`` is set; put ``(worker, start, end, error)`` on ``out``."""
    error = None
    start = end = 0.0
    try:
        cp = open_backend(spec)
        app = chat_graph().compile(checkpointer=cp, busy_timeout=busy_timeout)
        out.put(("ready", worker))
        go.wait(120)
        start = time.time()
        shift = worker % max(1, len(threads))
        order = threads[shift:] + threads[:shift]
        for turn in range(turns):
            for tid in order:
                app.invoke({"messages": [HumanMessage(f"w{worker} turn {turn}")]},
                           thread_id=tid)
        end = time.time()
        cp.close()
    except BaseException as exc:  # report to the parent, which fails the test
        import traceback

        error = f"{exc!r}\n{traceback.format_exc()}"
    out.put((worker, start, end, error))
