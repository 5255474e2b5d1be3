"""Tokens per second of a 200-token reply from the local model: threadloom vs raw openai.

Both sides talk to the same in-process llama.cpp server (SmolLM2-135M): the raw side
with the ``openai`` client's own stream, threadloom's through a graph node whose chat
model call feeds the ``messages`` stream mode. Runs alternate (raw, threadloom, raw, ...)
so both see the same machine load; the table shows medians and the overhead.

    python benchmarks/bench_local_stream.py [--runs 5] [--tokens 200]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Annotated, TypedDict

import openai

from threadloom import START, StateGraph, add_messages
from threadloom.models.local import LocalChatModel

PROMPT = "Write a long story about a lighthouse keeper and the sea."


def raw_run(client: openai.OpenAI, model: str, tokens: int) -> tuple[float, int]:
    start = time.perf_counter()
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROMPT}], stream=True,
        max_tokens=tokens, temperature=0, extra_body={"ignore_eos": True},
        stream_options={"include_usage": True},
    )
    produced = 0
    for chunk in stream:
        if chunk.usage is not None:
            produced = chunk.usage.completion_tokens
    return time.perf_counter() - start, produced


def threadloom_graph(model: LocalChatModel) -> object:
    class S(TypedDict):
        messages: Annotated[list, add_messages]

    def call(state: S) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(S)
    g.add_node("model", call)
    g.add_edge(START, "model")
    return g.compile()


def threadloom_run(graph: object, tokens: int) -> tuple[float, int]:
    start = time.perf_counter()
    produced = 0
    for chunk, _meta in graph.stream(  # type: ignore[attr-defined]
        {"messages": [("user", PROMPT)]}, stream_mode="messages"
    ):
        usage = getattr(chunk, "usage_metadata", None)
        if usage:
            produced = usage["output_tokens"]
    return time.perf_counter() - start, produced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args()
    model = LocalChatModel(
        temperature=0, max_tokens=args.tokens, extra_body={"ignore_eos": True}
    )
    model.invoke([("user", "hi")])  # start the server
    client = openai.OpenAI(base_url=model.base_url, api_key=model.api_key, max_retries=0)
    graph = threadloom_graph(model)
    served = client.models.list().data[0].id
    raw, tl = [], []
    for _ in range(args.runs):
        secs, n = raw_run(client, served, args.tokens)
        raw.append(n / secs)
        secs, n = threadloom_run(graph, args.tokens)
        tl.append(n / secs)
    model.close()
    r, t = statistics.median(raw), statistics.median(tl)
    print(f"| side | tokens/s (median of {args.runs}, {args.tokens}-token replies) |")
    print("|---|---|")
    print(f"| raw openai client | {r:.1f} |")
    print(f"| threadloom messages stream | {t:.1f} |")
    print(f"overhead: {(r - t) / r * 100:+.1f}% (target < 5%)")


if __name__ == "__main__":
    main()
