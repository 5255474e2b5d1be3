"""The run manager: making runs, queueing, cancelling, joining, and crash recovery.

A run is made ``pending`` (its row, its event log opened with the ``metadata`` event,
its thread marked ``busy``) and submitted to the queue, which starts it when the thread
is free. While the thread runs another run, ``multitask_strategy`` decides: ``reject``
answers 409, ``enqueue`` (the default of ``runs.create``) waits its turn, ``interrupt``
cancels the active run (its thread keeps the steps it saved) and ``rollback`` cancels it
and puts the thread back where it was before that run (and deletes the run).

A cancelled run ends ``interrupted``, and its thread too; ``runs.wait(input=None)``
goes on from the last saved step. After a SIGKILL, ``recover`` finds the runs left
``pending`` or ``running``: a pending one is queued again; a running one is resumed from
its last checkpoint (input None, ``attempt`` 2, 3, ... in its ``metadata`` event, its event
ids in a range of their own: ``eventlog.py``), or, when it had saved nothing, started again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from threadloom.server.assistants_store import Assistants
from threadloom.server.db import Tx
from threadloom.server.eventlog import EventLog
from threadloom.server.executor import Executor, Outcome, RunJob, describe_error
from threadloom.server.graphs import Assistant
from threadloom.server.http import ApiError, not_found
from threadloom.server.queue import RunQueue
from threadloom.server.run_checks import (
    check_checkpoint,
    check_interrupt_nodes,
    checkpointer_call,
)
from threadloom.server.runs_store import FINISHED, Runs
from threadloom.server.schemas import RunCreate
from threadloom.server.threads_store import OtherGraph, Threads
from threadloom.server.wire import dumps, jsonable, now_iso, uuid7

BUSY_DETAIL = ("Thread is already running a task. Wait for it to finish or choose a "
               "different multitask strategy.")


class RunManager:
    """See the module docstring. One per server process."""

    def __init__(self, assistants: Assistants, threads: Threads, runs: Runs, log: EventLog,
                 queue: RunQueue, executor: Executor | None = None, *,
                 run_timeout_s: float | None = None) -> None:
        self.assistants = assistants
        self.threads = threads
        self.runs = runs
        self.log = log
        self.queue = queue
        self.executor = executor or Executor(log)
        self.run_timeout_s = run_timeout_s
        self._jobs: dict[str, RunJob] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._outputs: dict[str, Any] = {}  # output of runs that ended here, until read
        self._cancel_action: dict[str, str] = {}
        self._watchers: dict[str, list[asyncio.Future[None]]] = {}
        queue.bind(self._execute)

    def watch(self, thread_id: str) -> asyncio.Future[None]:
        """A future set when the next run is made on the thread (take it before reading
        the thread's runs, so a run made meanwhile is not missed; ``unwatch`` it after)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watchers.setdefault(thread_id, []).append(waiter)
        return waiter

    def unwatch(self, thread_id: str, waiter: asyncio.Future[None]) -> None:
        """Forget a ``watch`` future (done or not)."""
        left = self._watchers.get(thread_id)
        if left is not None and waiter in left:
            left.remove(waiter)
            if not left:
                del self._watchers[thread_id]

    def _run_made(self, thread_id: str) -> None:
        for waiter in self._watchers.pop(thread_id, []):
            if not waiter.done():
                waiter.set_result(None)

    # -- making runs -------------------------------------------------------------------

    async def assistant(self, owner: str, ident: str) -> Assistant:
        """The assistant a run names (by id or graph name), at its latest version.

        Raises:
            ApiError: 404 naming it.
        """
        found = await self.assistants.resolve(owner, ident)
        if found is None:
            raise not_found("Assistant", ident)
        return found

    async def create(self, owner: str, thread_id: str | None, body: RunCreate, *,
                     default_strategy: str = "enqueue") -> dict[str, Any]:
        """Make a run and queue it; returns its wire record (status ``pending``).

        Args:
            owner: the caller's principal.
            thread_id: the thread; None for a stateless run (a temporary thread, deleted
                when the run ends unless ``on_completion="keep"``).
            body: the request.
            default_strategy: ``multitask_strategy`` when the body has none.

        Raises:
            ApiError: 404 unknown assistant or thread (``if_not_exists="reject"``);
                409 a busy thread under ``reject``; 422 ``input`` and ``command`` both.
        """
        strategy = body.multitask_strategy or default_strategy
        if thread_id is not None and self.queue.active(thread_id):
            await self._make_room(owner, thread_id, strategy)
        if thread_id is not None and (body.checkpoint_id or body.checkpoint):  # off the hot path
            await check_checkpoint(await self.assistants.resolve(owner, body.assistant_id),
                                   thread_id, body)
        run_id = uuid7()
        # The log opens before the row exists, so whoever finds the row finds its log.
        await self.log.open(run_id)
        try:  # one transaction from request to queued run: the first event waits on no more
            assistant, run = await self.runs.db.run(lambda tx: self._admit(
                tx, owner, thread_id, body, strategy, run_id))
        except BaseException:
            self.log.discard(run_id)
            raise
        self.log.append(run_id, "metadata", dumps({"run_id": run_id, "attempt": 1}))
        self._jobs[run_id] = RunJob(run, owner, assistant)
        self._done[run_id] = asyncio.Event()
        self._run_made(run["thread_id"])
        await self.queue.submit(run["thread_id"], run_id)
        return run

    async def _make_room(self, owner: str, thread_id: str, strategy: str) -> None:
        """The thread runs another run: 404 when it is not the caller's, 409 under
        ``reject``; ``interrupt``/``rollback`` cancel the active runs."""
        if await self.threads.get(owner, thread_id) is None:
            raise not_found("Thread", thread_id)
        if strategy == "reject":
            raise ApiError(409, BUSY_DETAIL)
        if strategy in ("interrupt", "rollback"):
            for other in self.queue.active(thread_id):
                await self.cancel_run(other, strategy)

    def _admit(self, tx: Tx, owner: str, thread_id: str | None, body: RunCreate,
               strategy: str, run_id: str) -> tuple[Assistant, dict[str, Any]]:
        """In one transaction: the assistant, the thread (made when temporary or
        ``if_not_exists="create"``) marked busy, the run's row."""
        assistant = self.assistants.resolve_tx(tx, owner, body.assistant_id)
        if assistant is None:
            raise not_found("Assistant", body.assistant_id)
        if body.input is not None and body.command is not None:
            raise ApiError(422, "input and command: give one of them, not both")
        check_interrupt_nodes(assistant, body)
        temporary = thread_id is None and body.on_completion != "keep"
        if thread_id is None:
            thread_id = str(Threads.create_tx(tx, owner, None, None,
                                              temporary=temporary)[0]["thread_id"])
        marks = {"graph_id": assistant.graph_id, "assistant_id": assistant.assistant_id}
        keys = getattr(assistant.graph, "channels", None)
        try:  # refused before anything is written: the thread stays as it was
            claimed = Threads.claim_tx(tx, owner, thread_id, marks, keys)
        except OtherGraph as exc:
            raise ApiError(409, str(exc)) from exc
        if claimed is None:
            if body.if_not_exists != "create" or tx.execute(
                    "SELECT 1 FROM tl_srv_threads WHERE thread_id = ?",
                    (thread_id,)).fetchone() is not None:
                raise not_found("Thread", thread_id)
            Threads.create_tx(tx, owner, thread_id, None)
            Threads.claim_tx(tx, owner, thread_id, marks)
        run = self._record(assistant, thread_id, body, strategy, temporary, run_id)
        Runs.insert_tx(tx, run, owner)
        return assistant, run

    @staticmethod
    def _record(assistant: Assistant, thread_id: str, body: RunCreate, strategy: str,
                temporary: bool, run_id: str) -> dict[str, Any]:
        now = now_iso()
        kwargs = {
            "input": jsonable(body.input),
            "command": body.command.model_dump(exclude_none=True) if body.command else None,
            "config": jsonable(body.config or {}), "context": jsonable(body.context or {}),
            "stream_mode": body.modes(), "interrupt_before": body.interrupt_before,
            "interrupt_after": body.interrupt_after, "temporary": temporary,
            "subgraphs": body.stream_subgraphs, "resumable": body.stream_resumable,
            "checkpoint_id": body.checkpoint_id or (body.checkpoint.checkpoint_id
                                                    if body.checkpoint else None),
            "durability": body.durability, "on_disconnect": body.on_disconnect or "continue",
        }
        return {"run_id": run_id, "thread_id": thread_id,
                "assistant_id": assistant.assistant_id, "created_at": now, "updated_at": now,
                "status": "pending", "metadata": jsonable(body.metadata or {}),
                "kwargs": kwargs, "multitask_strategy": strategy}

    # -- executing ---------------------------------------------------------------------

    async def _execute(self, run_id: str) -> None:
        job = self._jobs.get(run_id)
        if job is None:
            return
        thread_id = job.run["thread_id"]
        before: str | None = None
        try:
            before = await _latest_checkpoint(job.assistant, thread_id)
            await self.runs.mark_started(run_id, before)
            outcome = await self._execute_in_time(job)
            await self._finish(job, outcome)
        except asyncio.CancelledError:
            action = self._cancel_action.pop(run_id, None)
            if action is None:
                raise  # the server is stopping: the run stays "running", recovered later
            await self._cancelled(job, action, before)
        except Exception as exc:  # the bookkeeping failed: the run must still end
            await self._failed(job, exc)
        finally:
            self._jobs.pop(run_id, None)
            self.log.close(run_id)
            done = self._done.pop(run_id, None)
            if done is not None:
                done.set()

    async def _execute_in_time(self, job: RunJob) -> Outcome:
        """The run's outcome; ``timeout`` when it outlives ``run_timeout_s``."""
        try:
            async with asyncio.timeout(self.run_timeout_s):
                return await self.executor.execute(job)
        except TimeoutError:  # (a graph's own TimeoutError is an error outcome already)
            return await self.executor.timed_out(job, self.run_timeout_s or 0.0)

    async def _finish(self, job: RunJob, outcome: Outcome) -> None:
        run_id, thread_id = job.run["run_id"], job.run["thread_id"]
        if job.run["kwargs"].get("temporary"):  # its rows go with its thread
            self._outputs[run_id] = outcome.output
            while len(self._outputs) > 10_000:
                self._outputs.pop(next(iter(self._outputs)))
        await self.runs.set_status(run_id, outcome.status, outcome.output, has_output=True)
        if job.run["kwargs"].get("temporary"):
            await self._drop_thread(job)
            return
        await self.threads.set_state(thread_id, status=outcome.thread_status,
                                     values=outcome.values, interrupts=outcome.interrupts,
                                     error=outcome.error)

    async def _failed(self, job: RunJob, exc: Exception) -> None:
        """End a run whose bookkeeping raised (not its graph: ``execute`` catches that)
        as ``error``, with its ``error`` event, and free its thread."""
        error = describe_error(exc)
        with contextlib.suppress(Exception):
            self.log.append(job.run["run_id"], "error", dumps(error))
        try:
            await self._finish(job, Outcome("error", {"__error__": error}, "error",
                                            error=error))
        except Exception:
            await self.runs.set_status(job.run["run_id"], "error", {"__error__": error},
                                       has_output=True)
            await self.threads.set_state(job.run["thread_id"], status="error",
                                         state_changed=False)

    async def _cancelled(self, job: RunJob, action: str, before: str | None) -> None:
        run_id, thread_id = job.run["run_id"], job.run["thread_id"]
        graph = job.assistant.graph
        if action == "rollback":
            await self.runs.delete(job.owner, None, run_id)
            await _roll_back(graph, thread_id, before)
        snap = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        if action != "rollback":
            await self.runs.set_status(run_id, "interrupted", jsonable(snap.values) or {},
                                       has_output=True)
        status = "interrupted" if action != "rollback" and snap.next else "idle"
        await self.threads.set_state(thread_id, status=status, values=jsonable(snap.values)
                                     if snap.created_at else None)

    async def _drop_thread(self, job: RunJob) -> None:
        thread_id = job.run["thread_id"]
        await self.threads.delete(job.owner, thread_id)
        cp = job.assistant.graph.checkpointer
        if cp is not None:
            await checkpointer_call(cp, "delete_thread", thread_id)

    # -- cancelling, joining -----------------------------------------------------------

    async def cancel_run(self, run_id: str, action: str = "interrupt") -> None:
        """Cancel a queued or running run with ``action`` (``interrupt``/``rollback``)."""
        job = self._jobs.get(run_id)
        self._cancel_action[run_id] = action
        state = await self.queue.cancel(run_id)
        # a run cancelled before its execution began has no bookkeeping of its own yet
        if state != "unknown" and job is not None and run_id in self._jobs:
            self._cancel_action.pop(run_id, None)
            self._jobs.pop(run_id, None)
            if action == "rollback":
                await self.runs.delete(job.owner, None, run_id)
            else:
                await self.runs.set_status(run_id, "interrupted", {}, has_output=True)
            self.log.close(run_id)
            done = self._done.pop(run_id, None)
            if done is not None:
                done.set()
            self._outputs.pop(run_id, None)
            if not self.queue.active(job.run["thread_id"]):
                await self._settle_idle(job)
        elif state == "unknown":
            self._cancel_action.pop(run_id, None)

    async def _settle_idle(self, job: RunJob) -> None:
        thread = await self.threads.get(job.owner, job.run["thread_id"])
        if thread is not None and thread["status"] == "busy":
            await self.threads.set_state(job.run["thread_id"], status="idle",
                                         state_changed=False)

    async def wait(self, run_id: str) -> None:
        """Return when the run has ended (at once when it is not active here)."""
        done = self._done.get(run_id)
        if done is not None:
            await done.wait()

    async def wait_output(self, run_id: str) -> Any:
        """Wait for the run to end and return its output (also for a stateless run,
        whose rows are gone with its temporary thread)."""
        await self.wait(run_id)
        if run_id in self._outputs:
            return self._outputs.pop(run_id)
        return await self.runs.output(run_id)

    async def get_run(self, owner: str, thread_id: str | None, run_id: str) -> dict[str, Any]:
        """The run record.

        Raises:
            ApiError: 404 naming the run.
        """
        run = await self.runs.get(owner, thread_id, run_id)
        if run is None:
            raise not_found("Run", run_id)
        return run

    async def join(self, owner: str, thread_id: str, run_id: str) -> Any:
        """Wait for the run to end and return its output (the state, or ``__error__``)."""
        await self.get_run(owner, thread_id, run_id)
        await self.wait(run_id)
        return await self.runs.output(run_id)  # several may join: read the stored output

    # -- recovery ----------------------------------------------------------------------

    async def recover(self) -> int:
        """Queue again the runs a crash left ``pending`` or ``running``; returns how many.
        Their temporary threads are kept until they end."""
        count = 0
        for run, owner in await self.runs.unfinished():
            assistant = await self.assistants.get(owner, run["assistant_id"])
            if assistant is None:
                await self.runs.set_status(run["run_id"], "error", {"__error__": {
                    "error": "AssistantNotFound", "message": "its graph is no longer served"}},
                    has_output=True)
                continue
            started, before = await self.runs.started_from(run["run_id"])
            now = await _latest_checkpoint(assistant, run["thread_id"])
            resume = started and now is not None and now != before
            attempt = await self.log.open(run["run_id"], fresh=False)
            self.log.append(run["run_id"], "metadata", dumps({"run_id": run["run_id"],
                                                              "attempt": attempt}))
            await self.log.flush()  # a restart after this one sees this attempt
            self._jobs[run["run_id"]] = RunJob(run, owner, assistant, resume=resume)
            self._done[run["run_id"]] = asyncio.Event()
            await self.queue.submit(run["thread_id"], run["run_id"])
            count += 1
        return count

    async def close(self) -> None:
        """Stop every run (they stay ``running`` and are recovered at the next start)."""
        await self.queue.close()


async def _latest_checkpoint(assistant: Assistant, thread_id: str) -> str | None:
    """The id of the thread's latest root checkpoint (None: it has none): one read of
    the checkpointer, not a whole state snapshot."""
    cp = assistant.graph.checkpointer
    if cp is None:
        return None
    with contextlib.suppress(Exception):
        found = await checkpointer_call(cp, "get_tuple", {"configurable": {"thread_id": thread_id,
                                                               "checkpoint_ns": ""}})
        if found is not None:
            return str(found.config["configurable"].get("checkpoint_id"))
    return None


async def _roll_back(graph: Any, thread_id: str, before: str | None) -> None:
    """Put the thread back to checkpoint ``before`` (a fork of it becomes the latest);
    a thread that had none loses its checkpoints."""
    if before is None:
        if graph.checkpointer is not None:
            await checkpointer_call(graph.checkpointer, "delete_thread", thread_id)
        return
    await graph.aupdate_state({"configurable": {"thread_id": thread_id,
                                                "checkpoint_id": before}}, None)


__all__ = ["FINISHED", "RunManager"]
