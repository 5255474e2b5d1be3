"""The stream sink hands events put by other threads (a sync node's chat model, token by
token) to the loop in bursts: one pending loop wake-up at a time, in order."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from threadloom.engine.stream import StreamSink


def test_events_from_another_thread_wake_the_loop_once_per_burst() -> None:
    async def main() -> tuple[list[Any], int]:
        sink = StreamSink(["messages"], False)
        emit = sink.bind(())
        wakes = [0]
        real = sink.loop.call_soon_threadsafe

        def counted(*args: Any) -> Any:
            wakes[0] += 1
            return real(*args)

        sink.loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        worker = threading.Thread(target=lambda: [emit("messages", i) for i in range(100)])
        worker.start()
        worker.join()  # the loop runs nothing meanwhile: one wake-up is pending
        emit("messages", "here")  # the loop's own thread: after the others, in order
        sink.close()
        got = []
        while (items := await sink.get_many()) is not None:
            got.extend(payload for _, _, payload in items)
        return got, wakes[0]

    got, wakes = asyncio.run(main())
    assert got == [*range(100), "here"]
    assert wakes == 1


def test_a_run_error_reaches_the_consumer_after_every_event() -> None:
    async def main() -> list[Any]:
        sink = StreamSink(["custom"], False)
        emit = sink.bind(())
        got: list[Any] = []
        threading.Thread(target=lambda: (emit("custom", 1), emit("custom", 2))).start()
        await asyncio.sleep(0.05)
        sink.close(KeyError("boom"))
        try:
            while (item := await sink.get()) is not None:
                got.append(item[2])
        except KeyError:
            got.append("error")
        return got

    assert asyncio.run(main()) == [1, 2, "error"]
