"""The run's own keys in each checkpoint's metadata, as LangGraph's checkpointers add them
(``get_checkpoint_metadata``): ``config["metadata"]``, then ``config["configurable"]``,
each key a string, number or bool, not already set, not ``__``-private and not one of
the checkpoint's own (``thread_id``, ``checkpoint_id``, ``checkpoint_ns``, ...). So
``checkpointer.list(None, filter={"user_id": ...})`` finds a user's threads and a
snapshot's ``metadata`` shows them, as on LangGraph.

One difference on purpose (SECURITY.md: an API-key canary never reaches a checkpoint):
a key whose name looks like a secret (``key``, ``token``, ``secret``, ``password``,
``auth``...) is not copied; LangGraph copies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadloom.redact import is_secret_name

EXCLUDED = frozenset({
    "thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "langgraph_step",
    "langgraph_node", "langgraph_triggers", "langgraph_path", "langgraph_checkpoint_ns",
})
"""Keys never copied (LangGraph's ``EXCLUDED_METADATA_KEYS``)."""


def run_metadata(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``config`` (a run's config) every checkpoint of the run records in its
    metadata; see the module docstring. NUL characters are dropped from strings, as
    LangGraph drops them."""
    found: dict[str, Any] = {}
    for source in (config.get("metadata"), config.get("configurable")):
        if not source:
            continue
        for key, value in source.items():
            if (key in found or key in EXCLUDED or not isinstance(key, str)
                    or key.startswith("__") or is_secret_name(key)):
                continue
            if isinstance(value, str):
                found[key] = value.replace("\x00", "")
            elif isinstance(value, int | float | bool):
                found[key] = value
    return found
