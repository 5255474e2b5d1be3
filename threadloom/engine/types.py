"""The engine's value types under their earlier import path.

They live in ``threadloom.types`` (the bottom of the package, shared by the engine and the
checkpoint codec); this module re-exports them so code that imports
``threadloom.engine.types`` keeps working. Inside threadloom nothing imports from here
(``tests/test_layout.py`` checks it).
"""

from threadloom.types import (
    END,
    RESERVED_NAMES,
    START,
    Command,
    Durability,
    Interrupt,
    RetryPolicy,
    Send,
    StreamMode,
)

__all__ = [
    "END",
    "RESERVED_NAMES",
    "START",
    "Command",
    "Durability",
    "Interrupt",
    "RetryPolicy",
    "Send",
    "StreamMode",
]
