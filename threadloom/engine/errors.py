"""The engine's exceptions under their earlier import path.

Every exception lives in ``threadloom.errors`` (the bottom of the package); this module
re-exports them so code that imports ``threadloom.engine.errors`` keeps working. Inside
threadloom nothing imports from here (``tests/test_layout.py`` checks it).
"""

from threadloom.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    ContentFilterError,
    EmptyInputError,
    GraphBuildError,
    GraphRecursionError,
    GraphRunError,
    GraphValidationError,
    InvalidRouteError,
    InvalidUpdateError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    NodeTimeoutError,
    RateLimitError,
    ScriptExhaustedError,
    SecurityError,
    SerializationError,
    ThreadBusyError,
    ThreadloomError,
    ToolError,
    UntrustedTypeError,
    add_node_note,
)

__all__ = [
    "CheckpointError",
    "CheckpointNotFoundError",
    "ContentFilterError",
    "EmptyInputError",
    "GraphBuildError",
    "GraphRecursionError",
    "GraphRunError",
    "GraphValidationError",
    "InvalidRouteError",
    "InvalidUpdateError",
    "ModelError",
    "ModelHTTPError",
    "ModelTimeoutError",
    "NodeTimeoutError",
    "RateLimitError",
    "ScriptExhaustedError",
    "SecurityError",
    "SerializationError",
    "ThreadBusyError",
    "ThreadloomError",
    "ToolError",
    "UntrustedTypeError",
    "add_node_note",
]
