"""``threadloom serve`` under load, side by side with ``langgraph dev`` when it is there.

The workload (the same on both sides): a scripted agent graph over a messages state,
``model -> tools -> model -> END``, whose model node awaits 20 ms per call (so a run's
ideal time is 40 ms) and whose tool appends one tool message. N clients each stream one
run on a thread of their own (``POST /threads/{id}/runs/stream``, ``stream_mode``
``updates``), all at once, over loopback. Reported: runs per second (N / wall time of the
whole burst), p50/p99 time to the first SSE event, the server's resident memory after the
burst (its process tree), and failed streams. Three bursts: 200 streams (the p99 target),
1,000 streams (held at once, with no error), and the reference burst for the ratio.

    python benchmarks/bench_server.py                 # threadloom only, or both sides
    python benchmarks/bench_server.py --quick         # smaller bursts
    LGDEV_VENV=/tmp/lgdev-venv python benchmarks/bench_server.py

The reference side runs when ``$LGDEV_VENV/bin/langgraph`` exists (a venv with
``langgraph-cli[inmem]``, outside the repository; it is never a dependency). Every count
and every wait is bounded; the load stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

TL_GRAPH = '''
import asyncio
from threadloom import END, START, AIMessage, MessagesState, StateGraph, ToolMessage

async def model(state):
    await asyncio.sleep(0.02)
    if state["messages"][-1].type == "tool":
        return {"messages": [AIMessage(content="done: " + state["messages"][-1].content)]}
    return {"messages": [AIMessage(content="", tool_calls=[
        {"name": "bump", "args": {"x": 1}, "id": "call_1"}])]}

def tools(state):
    return {"messages": [ToolMessage(content="2", tool_call_id="call_1")]}

def route(state):
    return "tools" if state["messages"][-1].tool_calls else END

g = StateGraph(MessagesState)
g.add_node("model", model)
g.add_node("tools", tools)
g.add_edge(START, "model")
g.add_conditional_edges("model", route, ["tools", END])
g.add_edge("tools", "model")
graph = g
'''

LG_GRAPH = TL_GRAPH.replace(
    "from threadloom import END, START, AIMessage, MessagesState, StateGraph, ToolMessage",
    "from langgraph.graph import END, START, MessagesState, StateGraph\n"
    "from langchain_core.messages import AIMessage, ToolMessage").replace(
    "graph = g", "graph = g.compile()")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its descendants (from /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for child in Path(f"/proc/{p}/task").iterdir():
                kids = (child / "children").read_text().split()
                todo += [int(k) for k in kids]
    return total


async def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as c:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await c.get(url + "/ok", timeout=1)).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def _request(host: str, port: int, method: str, path: str, body: dict[str, Any]
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
    """Send one HTTP/1.1 request on a new connection (a lean client: httpx's own cost
    under 1,000 concurrent streams would be measured instead of the server's)."""
    reader, writer = await asyncio.open_connection(host, port)
    data = json.dumps(body).encode()
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: "
                 f"application/json\r\nContent-Length: {len(data)}\r\nAccept: "
                 f"text/event-stream\r\nConnection: close\r\n\r\n".encode() + data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    return reader, writer, status


async def one_stream(host: str, port: int, thread_id: str, assistant: str
                     ) -> tuple[float, float, bool]:
    """(seconds to the first event, seconds to the end, ok) of one streamed run."""
    body = {"assistant_id": assistant, "input": {"messages": [{"role": "user", "content": "go"}]},
            "stream_mode": ["updates"]}
    start = time.perf_counter()
    first, events, ok = 0.0, 0, True
    try:
        reader, writer, status = await _request(host, port, "POST",
                                                f"/threads/{thread_id}/runs/stream", body)
        if status != 200:
            writer.close()
            return 0.0, 0.0, False
        while True:  # the body is chunked; event lines are found inside the chunks
            line = await reader.readline()
            if not line:
                break
            if b"event:" in line:
                if not events:
                    first = time.perf_counter() - start
                events += line.count(b"event:")
                ok = ok and b"event: error" not in line
        writer.close()
    except OSError:
        return first, time.perf_counter() - start, False
    return first, time.perf_counter() - start, ok and events >= 4  # metadata + 3 updates


async def burst(url: str, n: int, assistant: str) -> dict[str, Any]:
    host, port = url.split("//")[1].split(":")
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as c:
        threads = []
        for i in range(0, n, 50):  # untimed: the threads exist before the burst
            made = await asyncio.gather(*(c.post("/threads", json={})
                                          for _ in range(min(50, n - i))))
            threads += [r.json()["thread_id"] for r in made]
    start = time.perf_counter()
    results = await asyncio.gather(*(one_stream(host, int(port), t, assistant)
                                     for t in threads))
    wall = time.perf_counter() - start
    firsts = sorted(r[0] for r in results if r[2])
    failed = sum(1 for r in results if not r[2])
    return {"n": n, "runs_per_s": n / wall, "wall_s": wall, "failed": failed,
            "p50_first_ms": 1000 * statistics.median(firsts) if firsts else None,
            "p99_first_ms": 1000 * firsts[min(len(firsts) - 1, int(0.99 * len(firsts)))]
            if firsts else None}


def start_threadloom(work: Path, port: int) -> subprocess.Popen[bytes]:
    (work / "tl_agent.py").write_text(TL_GRAPH)
    return subprocess.Popen(
        [sys.executable, "-m", "threadloom.server", f"agent={work / 'tl_agent.py'}:graph",
         "--db", str(work / "bench.db"), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_langgraph_dev(work: Path, port: int, venv: Path) -> subprocess.Popen[bytes]:
    ref = work / "lgref"
    ref.mkdir()
    (ref / "agent.py").write_text(LG_GRAPH)
    (ref / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}))
    return subprocess.Popen(
        [str(venv / "bin" / "langgraph"), "dev", "--port", str(port), "--host", "127.0.0.1",
         "--no-browser", "--no-reload"], cwd=ref, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)


async def measure(name: str, proc: subprocess.Popen[bytes], url: str,
                  sizes: list[int]) -> list[dict[str, Any]]:
    await wait_up(url)
    await burst(url, 10, "agent")  # warm-up
    out = []
    for n in sizes:
        result = await burst(url, n, "agent")
        result.update(side=name, rss_mb=tree_rss(proc.pid) / 1e6)
        out.append(result)
        print(f"  {name:14} N={n:5}  {result['runs_per_s']:8.1f} runs/s  "
              f"p50 {result['p50_first_ms'] or 0:7.1f} ms  p99 {result['p99_first_ms'] or 0:7.1f}"
              f" ms  RSS {result['rss_mb']:6.0f} MB  failed {result['failed']}", flush=True)
    return out


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="bursts of 50 and 200")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    sizes = [50, 200] if args.quick else [200, 1000]
    venv = Path(os.environ.get("LGDEV_VENV", "/tmp/lgdev-venv"))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port = free_port()
        proc = start_threadloom(work, port)
        try:
            rows += asyncio.run(measure("threadloom", proc, f"http://127.0.0.1:{port}", sizes))
        finally:
            stop(proc)
        if (venv / "bin" / "langgraph").exists():
            port = free_port()
            proc = start_langgraph_dev(work, port, venv)
            try:
                rows += asyncio.run(measure("langgraph dev", proc, f"http://127.0.0.1:{port}",
                                            sizes[:1]))
            finally:
                stop(proc)
        else:
            print(f"  langgraph dev: not installed (no {venv}/bin/langgraph)")
    tl = [r for r in rows if r["side"] == "threadloom"]
    lg = [r for r in rows if r["side"] == "langgraph dev"]
    if tl and lg:
        print(f"  runs/s ratio at N={lg[0]['n']}: "
              f"{tl[0]['runs_per_s'] / lg[0]['runs_per_s']:.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["failed"] == 0 for r in tl) else 1


if __name__ == "__main__":
    sys.exit(main())
