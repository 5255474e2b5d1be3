"""Streaming adapter overhead: OpenAIChatModel vs the raw `openai` client, same stream.

A loopback server (tests/providers_server.py) serves one streamed reply of 2,000 SSE
chunks carrying 3 parallel tool calls (arguments split over ~665 deltas each), a finish
chunk and an include_usage chunk. Three consumers read it, interleaved, REPEAT times:

- raw:    ``for chunk in client.chat.completions.create(stream=True)`` (parse only);
- stream: ``OpenAIChatModel.stream`` (chunks converted to AIMessageChunk) and assembled
          with ``ChunkAccumulator`` (what a ``messages``-streaming graph run does);
- invoke: ``OpenAIChatModel(streaming=True).invoke`` (stream, convert, assemble, guard).

Reports median chunks/second and the overhead over raw (target < 10%).
Run: ``python3 benchmarks/bench_stream_adapter.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from providers_server import ProviderServer, stream_reply  # noqa: E402

from threadloom.models import ChunkAccumulator, OpenAIChatModel  # noqa: E402

N_CHUNKS = 2000
N_CALLS = 3


def build_stream() -> tuple[list[dict], dict[str, dict]]:
    """The chunk list and the arguments each call must assemble to."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
            "model": "bench-model", "system_fingerprint": "fp_bench"}

    def chunk(delta, finish=None):
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    per_call = (N_CHUNKS - 3) // N_CALLS  # role chunk, finish chunk, usage chunk
    chunks = [chunk({"role": "assistant", "content": None})]
    expected = {}
    for i in range(N_CALLS):
        pieces = [f'"k{j}": {j}, ' for j in range(per_call - 2)]
        chunks.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                             "function": {"name": f"tool_{i}",
                                                          "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": "{"}}]}))
        for piece in pieces[:-1]:
            chunks.append(chunk({"tool_calls": [{"index": i,
                                                 "function": {"arguments": piece}}]}))
        chunks.append(chunk({"tool_calls": [{"index": i, "function": {
            "arguments": pieces[-1].rstrip(", ") + "}"}}]}))
        expected[f"call_{i}"] = json.loads("{" + "".join(pieces).rstrip(", ") + "}")
    while len(chunks) < N_CHUNKS - 2:
        chunks.append(chunk({"content": ""}))
    chunks.append(chunk({}, "tool_calls"))
    chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 100,
                                                    "completion_tokens": 5000,
                                                    "total_tokens": 5100}})
    return chunks, expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    chunks, expected = build_stream()
    with ProviderServer() as server:
        server.default = stream_reply(chunks)
        client = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        model = OpenAIChatModel("bench-model", base_url=server.base_url, api_key="bench",
                                max_retries=0)
        invoker = OpenAIChatModel("bench-model", base_url=server.base_url, api_key="bench",
                                  max_retries=0, streaming=True)
        msgs = [{"role": "user", "content": "go"}]

        def raw() -> int:
            n = 0
            for _ in client.chat.completions.create(model="bench-model", messages=msgs,
                                                    stream=True,
                                                    stream_options={"include_usage": True}):
                n += 1
            return n

        def stream() -> int:
            acc, n = ChunkAccumulator(), 0
            for c in model.stream(msgs):
                acc.add(c)
                n += 1
            check(acc.result())
            return n

        def invoke() -> int:
            check(invoker.invoke(msgs))
            return N_CHUNKS

        def check(msg) -> None:
            got = {c["id"]: c["args"] for c in msg.tool_calls}
            if got != expected or msg.usage["total_tokens"] != 5100:
                raise RuntimeError("adapter assembled the wrong tool calls or usage")

        times: dict[str, list[float]] = {"raw": [], "stream": [], "invoke": []}
        cpu: dict[str, list[float]] = {"raw": [], "stream": [], "invoke": []}
        fns = {"raw": raw, "stream": stream, "invoke": invoke}
        for fn in fns.values():  # warm-up: connections, imports, caches
            fn()
        for _ in range(args.repeat):
            for name, fn in fns.items():
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    raw_wall, raw_cpu = statistics.median(times["raw"]), statistics.median(cpu["raw"])
    print(f"{N_CHUNKS} SSE chunks, {N_CALLS} parallel tool calls, loopback, "
          f"median of {args.repeat} runs (interleaved); CPU = this process (client + server "
          f"thread), less sensitive to other load than wall time")
    print(f"{'consumer':<10}{'wall ms':>9}{'chunks/s':>10}{'overhead':>10}"
          f"{'cpu ms':>9}{'cpu overhead':>14}")
    for name in times:
        wall, used = statistics.median(times[name]), statistics.median(cpu[name])
        ow = "-" if name == "raw" else f"{(wall / raw_wall - 1) * 100:+.1f}%"
        oc = "-" if name == "raw" else f"{(used / raw_cpu - 1) * 100:+.1f}%"
        print(f"{name:<10}{wall * 1000:>9.1f}{N_CHUNKS / wall:>10,.0f}{ow:>10}"
              f"{used * 1000:>9.1f}{oc:>14}")


if __name__ == "__main__":
    main()
