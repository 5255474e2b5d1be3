"""The request bodies of the HTTP API, as pydantic models (the shapes ``langgraph_sdk``
sends). Unknown fields are ignored, as the SDK adds fields over its versions (``webhook``,
``feedback_keys``, ``langsmith_tracer``...); known fields are checked, and a failure
answers 422 naming the field (``http.validate``).
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

StreamModeName = Literal["values", "updates", "messages", "messages-tuple", "custom", "debug",
                         "events", "tasks", "checkpoints"]
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RunStatus = Literal["pending", "running", "success", "error", "interrupted", "timeout"]

_OPEN = ConfigDict(extra="ignore")


class Body(BaseModel):
    """Base of every body: unknown fields are ignored."""

    model_config = _OPEN


class CommandBody(Body):
    """``command``: resume an interrupt, update the state, route."""

    resume: Any = None
    update: Any = None
    goto: Any = None


class Checkpoint(Body):
    """A checkpoint named by id (``{"checkpoint_id": ..., "checkpoint_ns": ""}``)."""

    checkpoint_id: str | None = None
    checkpoint_ns: str = ""
    thread_id: str | None = None


class RunCreate(Body):
    """``POST /threads/{id}/runs`` (and ``/stream``, ``/wait``, stateless ``/runs...``)."""

    assistant_id: str = Field(min_length=1, max_length=200)
    input: Any = None
    command: CommandBody | None = None
    stream_mode: StreamModeName | list[StreamModeName] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    checkpoint: Checkpoint | None = None
    checkpoint_id: str | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    multitask_strategy: MultitaskStrategy | None = None
    if_not_exists: Literal["reject", "create"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: float | None = Field(default=None, ge=0, le=86_400)
    durability: Literal["sync", "async", "exit"] | None = None

    @field_validator("stream_mode")
    @classmethod
    def _modes(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def modes(self) -> list[str]:
        """The requested stream modes as a list (``values`` when none)."""
        modes = self.stream_mode if isinstance(self.stream_mode, list) else [self.stream_mode]
        return list(dict.fromkeys(modes)) or ["values"]


class ThreadCreate(Body):
    """``POST /threads``."""

    thread_id: UUID | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[dict[str, Any]] | None = None


class ThreadPatch(Body):
    """``PATCH /threads/{id}``: metadata is merged into the thread's."""

    metadata: dict[str, Any] | None = None


class ThreadSearch(Body):
    """``POST /threads/search`` (and ``/threads/count``)."""

    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: ThreadStatus | None = None
    limit: int = Field(default=10, ge=0, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at",
                     "state_updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


class ThreadPrune(Body):
    """``POST /threads/prune``."""

    thread_ids: list[str] = Field(max_length=10_000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class StateUpdate(Body):
    """``POST /threads/{id}/state``: write values as a node (a fork with a checkpoint)."""

    values: Any = None
    as_node: str | None = None
    checkpoint: Checkpoint | None = None
    checkpoint_id: str | None = None


class StateAtCheckpoint(Body):
    """``POST /threads/{id}/state/checkpoint``."""

    checkpoint: Checkpoint
    subgraphs: bool = False


class HistoryQuery(Body):
    """``POST /threads/{id}/history``."""

    limit: int = Field(default=10, ge=1, le=1000)
    before: Checkpoint | str | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: Checkpoint | None = None


class AssistantSearch(Body):
    """``POST /assistants/search`` (and ``/assistants/count``)."""

    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=0, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


class AssistantCreate(Body):
    """``POST /assistants``."""

    graph_id: str = Field(min_length=1, max_length=200)
    assistant_id: str | None = Field(default=None, max_length=200)
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: str | None = Field(default=None, max_length=1000)
    description: str | None = None


class AssistantPatch(Body):
    """``PATCH /assistants/{id}``: what the new version changes."""

    graph_id: str | None = Field(default=None, min_length=1, max_length=200)
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(default=None, max_length=1000)
    description: str | None = None


class AssistantVersions(Body):
    """``POST /assistants/{id}/versions``."""

    metadata: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=0, le=1000)
    offset: int = Field(default=0, ge=0)


class LatestVersion(Body):
    """``POST /assistants/{id}/latest``."""

    version: int = Field(ge=1)


class CancelMany(Body):
    """``POST /runs/cancel``."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


class ChatMessage(Body):
    """One OpenAI chat message."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChatCompletion(Body):
    """``POST /v1/chat/completions`` (OpenAI's body; ``model`` names the assistant)."""

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None
    n: int | None = None
    stream_options: dict[str, Any] | None = None
