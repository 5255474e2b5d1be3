"""Every public exception threadloom raises.

The tree, as httpx draws its own::

    ThreadloomError
    ├── GraphBuildError            raised by the builder and compile(): the graph is wrong
    │   │                          (also a ValueError, as LangGraph raises)
    │   └── GraphValidationError   unknown nodes, no entry point, bad names
    ├── GraphRunError              raised while a graph runs
    │   ├── InvalidUpdateError     a node wrote something the state cannot take
    │   │   └── InputValidationError  a pydantic state's input failed validation (also
    │   │                          pydantic's ValidationError, as LangGraph raises)
    │   ├── GraphRecursionError    recursion_limit super-steps passed without finishing
    │   │                          (also a RecursionError, as LangGraph's)
    │   ├── InvalidRouteError      an edge or Command routed to a node that does not exist
    │   ├── EmptyInputError        no input and nothing to resume
    │   ├── EmptyChannelError      get() of a channel object that holds no value
    │   ├── ResumeError            a resume that does not say which pending interrupt it
    │   │                          answers (also a RuntimeError, as LangGraph raises)
    │   ├── NodeCancelledError     a node raised asyncio.CancelledError itself
    │   ├── GraphDrained           the run stopped between steps: RunControl.request_drain()
    │   ├── RecordedNodeError      a failed node's error read back from a checkpoint
    │   └── NodeTimeoutError       reserved for per-node deadlines
    ├── CheckpointError            persistence
    │   ├── SerializationError     a value the closed codec cannot write or must refuse to read
    │   │   └── UntrustedTypeError stored data named a type outside the allow-list (also a
    │   │                          SecurityError)
    │   ├── ThreadBusyError        another run holds the thread
    │   └── CheckpointNotFoundError
    ├── SecurityError              a template or stored blob tried to reach Python internals
    ├── ToolError                  a tool call that cannot run (unknown tool, bad arguments)
    ├── ToolException              raised by a tool's own code to report a failure
    │   └── ToolInvocationError    a ToolNode call's arguments failed validation
    └── ModelError                 a chat model failed
        ├── ModelHTTPError         the provider answered with an HTTP error (status_code, code)
        │   ├── RateLimitError     429
        │   └── ContentFilterError the provider's content filter refused the prompt
        ├── ModelTimeoutError      the request timed out
        └── ScriptExhaustedError   a ScriptedChatModel ran past the end of its script

Outside the tree, not an error: ``ParentCommand`` (a ``BaseException``), the control
flow of ``Command(graph=Command.PARENT)``.

Exceptions carry structured fields (``node``, ``step``, ``field``...) so callers need not
parse messages. Errors raised by user code inside a node are re-raised unchanged, with a
note (PEP 678) naming the node and the super-step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


class ThreadloomError(Exception):
    """Base class of every threadloom exception."""


class GraphBuildError(ThreadloomError, ValueError):
    """The graph definition is wrong; raised by the builder or by ``compile()``.

    Also a ``ValueError``, which is what LangGraph raises for the same faults.
    """


class GraphValidationError(GraphBuildError):
    """``compile()`` found a structural fault.

    Attributes:
        node: the node at fault, when there is one.
    """

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class GraphRunError(ThreadloomError):
    """A fault found while a graph runs."""


class InvalidUpdateError(GraphRunError):
    """A node's update cannot be applied to the state.

    Attributes:
        field: the state key at fault (None when the whole update is wrong).
        nodes: the node(s) whose writes clashed or were invalid.
        step: the super-step, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        nodes: tuple[str, ...] = (),
        step: int | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.nodes = nodes
        self.step = step


class InputValidationError(InvalidUpdateError, ValidationError):
    """A run's input does not validate against its pydantic state schema.

    Both an ``InvalidUpdateError`` (``field`` names the key; the message says which key
    of which schema) and pydantic's ``ValidationError`` (``errors()``), which is what
    LangGraph raises. Build one with ``from_validation``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # called by pydantic-core
        self.field: str | None = None
        self.nodes: tuple[str, ...] = ()
        self.step: int | None = None
        self.message = ""

    @classmethod
    def from_validation(cls, exc: ValidationError, message: str,
                        field: str | None) -> InvalidUpdateError:
        """The error for ``exc`` (a plain ``InvalidUpdateError`` when pydantic cannot
        rebuild its details)."""
        try:
            made = cls.from_exception_data(exc.title, exc.errors())  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - details pydantic will not rebuild
            return InvalidUpdateError(message, field=field)
        made.message, made.field = message, field
        return made

    def __str__(self) -> str:
        return self.message


class GraphRecursionError(GraphRunError, RecursionError):
    """The run passed ``recursion_limit`` super-steps without reaching ``END``.

    As LangGraph's error of the same name (a ``RecursionError`` too); the limit counts
    steps of one invocation, not of the whole thread.

    Attributes:
        limit: the recursion limit in force.
        step: the super-step at which the run was stopped.
        nodes: the nodes that would have run next.
    """

    def __init__(self, message: str, *, limit: int, step: int, nodes: tuple[str, ...]) -> None:
        super().__init__(message)
        self.limit = limit
        self.step = step
        self.nodes = nodes


class InvalidRouteError(GraphRunError):
    """A conditional edge or ``Command.goto`` named a node the graph does not have, or
    a thread's saved checkpoint names a next node this graph lacks (the thread was made by
    another graph).

    Attributes:
        node: the node whose edge or command routed (``"__checkpoint__"`` for a saved
            checkpoint's next nodes).
        target: the name it routed to.
        step: the super-step.
    """

    def __init__(self, message: str, *, node: str, target: object, step: int) -> None:
        super().__init__(message)
        self.node = node
        self.target = target
        self.step = step


class EmptyInputError(GraphRunError):
    """``invoke(None)`` on a thread with nothing to resume."""


class EmptyChannelError(GraphRunError):
    """``get()`` of a channel object that holds no value (LangGraph's)."""


class ResumeError(GraphRunError, RuntimeError):
    """``Command(resume=...)`` cannot be matched to the pending interrupts: one plain
    value with several pending, or a resume map naming none of them."""


class NodeTimeoutError(GraphRunError):
    """A node ran past its deadline."""


class GraphDrained(GraphRunError):
    """The run stopped between two super-steps because its ``RunControl`` was asked to
    drain (``request_drain``), as LangGraph's; the thread's checkpoint is saved, so
    ``invoke(None, config)`` continues it.

    Attributes:
        reason: the reason given to ``request_drain``.
    """

    def __init__(self, reason: str = "shutdown") -> None:
        super().__init__(f"Graph drained: {reason}")
        self.reason = reason


class NodeCancelledError(GraphRunError):
    """A node raised ``asyncio.CancelledError`` itself (not cancelled by the run), as
    LangGraph's: the run fails instead of ending as if the node had been torn down.

    Attributes:
        node: the node that raised it.
    """

    def __init__(self, node: str, message: str | None = None) -> None:
        super().__init__(message or f"Node {node!r} raised asyncio.CancelledError")
        self.node = node


@dataclass(frozen=True, slots=True)
class NodeError:
    """What a node's ``error_handler`` receives as its ``error`` argument (as
    LangGraph's): the failed node and its exception (after the node's retries). On a
    resume after a crash, ``error`` is rebuilt from the checkpoint: an exception of
    the same message (a ``RecordedNodeError`` naming the original type).
    """

    node: str
    error: BaseException


class RecordedNodeError(GraphRunError):
    """A node's error read back from a checkpoint (the original type is not rebuilt).

    Attributes:
        type_name: the class name of the original exception.
    """

    def __init__(self, message: str, type_name: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name


class CheckpointError(ThreadloomError):
    """A checkpointer could not store or load a checkpoint."""


class SerializationError(CheckpointError):
    """The closed codec refused a value.

    Attributes:
        path: where in the stored value the fault is (e.g. ``"channel_values.items[2]"``).
        type_name: the offending type's qualified name.
    """

    def __init__(self, message: str, *, path: str = "", type_name: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.type_name = type_name


class ThreadBusyError(CheckpointError):
    """Another run holds the thread's lease.

    Attributes:
        thread_id: the busy thread.
    """

    def __init__(self, message: str, *, thread_id: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id


class CheckpointNotFoundError(CheckpointError):
    """A ``checkpoint_id`` or ``thread_id`` named by the config does not exist."""


class SecurityError(ThreadloomError):
    """Input tried to reach what it must not (Python internals, files, unknown classes)."""


class ToolError(ThreadloomError):
    """A tool call could not run.

    Attributes:
        tool_name: the tool the model asked for.
        tool_call_id: the call's id.
    """

    def __init__(
        self, message: str, *, tool_name: str = "", tool_call_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id


class ToolException(ThreadloomError):
    """Raised by a tool's own code to report a failure the model should read.

    As LangChain's ``ToolException``: a tool whose ``handle_tool_error`` is set answers
    it with an error ``ToolMessage`` instead of raising; ``ToolNode``'s
    ``handle_tool_errors`` may name it.
    """


class ToolInvocationError(ToolException):
    """A ``ToolNode`` call's arguments failed validation (as LangGraph's).

    ``ToolNode`` answers it with an error message unless ``handle_tool_errors`` leaves it
    out (``False``, a tuple or a typed handler not covering it): then it is raised.

    Attributes:
        message: the text the model gets (tool name, the arguments, one line per error).
        tool_name: the tool.
        tool_kwargs: the arguments as the model sent them.
        source: the ``ToolError`` (its ``__cause__`` the pydantic ``ValidationError``).
    """

    def __init__(self, tool_name: str, source: Exception, tool_kwargs: Any,
                 message: str) -> None:
        super().__init__(message)
        self.message = message
        self.tool_name = tool_name
        self.tool_kwargs = tool_kwargs
        self.source = source


class UntrustedTypeError(SerializationError, SecurityError):
    """Stored data named a type outside the codec's allow-list; nothing was built or run."""


class ModelError(ThreadloomError):
    """A chat model call failed."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error.

    Attributes:
        status_code: the HTTP status (e.g. 400, 401, 404, 429, 500).
        code: the provider's error code (``error.code``), when given.
        body: the decoded error body, when given.
        retryable: whether re-sending (or re-prompting) may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        code: str | None = None,
        body: Any = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.body = body
        self.retryable = retryable


class RateLimitError(ModelHTTPError):
    """HTTP 429 from the provider."""


class ContentFilterError(ModelHTTPError):
    """The provider's content filter refused the request (e.g. Azure ``content_filter``)."""


class ModelTimeoutError(ModelError):
    """The request to the model timed out."""


class ScriptExhaustedError(ModelError):
    """A ``ScriptedChatModel`` was called more times than its script has entries."""


class ParentCommand(BaseException):  # noqa: N818 - control flow, as LangGraph's name
    """A ``Command(graph=Command.PARENT)`` on its way from a subgraph's node to the parent
    graph's node, which routes by it; it is not an error, so not a ``ThreadloomError``.

    Raised out of ``invoke``/``stream`` only by a graph that runs on its own (not as a
    subgraph), as LangGraph does. ``args[0]`` and ``command`` are the ``Command``.
    """

    def __init__(self, command: Any) -> None:
        super().__init__(command)
        self.command = command


def add_node_note(exc: BaseException, node: str, step: int) -> BaseException:
    """Attach a note naming ``node`` and ``step`` to an exception raised by user code."""
    note = f"while running node {node!r} at super-step {step}"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    return exc
