"""The public names of DESIGN.md import, and each has a docstring."""

from __future__ import annotations

import importlib
import inspect

import threadloom

EXTRA_MODULES = {
    "threadloom.checkpoint.postgres": ["PostgresCheckpointer"],
    "threadloom.models.local": ["LocalChatModel"],
    "threadloom.models.cassette": ["RecordingChatModel", "ReplayChatModel"],
    "threadloom.agent.middleware": [
        "AgentMiddleware", "before_agent", "before_model", "after_model", "after_agent",
        "wrap_model_call", "wrap_tool_call",
    ],
}
CONSTANTS = {"START", "END", "REMOVE_ALL_MESSAGES"}


def _documented(obj: object) -> bool:
    return bool(inspect.getdoc(obj) and inspect.getdoc(obj).strip())


def test_every_top_level_name_imports_and_has_a_docstring():
    undocumented = [
        name for name in threadloom.__all__
        if name not in CONSTANTS and not _documented(getattr(threadloom, name))
    ]
    assert not undocumented


def test_names_outside_the_top_level_import_and_have_docstrings():
    for module, names in EXTRA_MODULES.items():
        mod = importlib.import_module(module)
        for name in names:
            assert _documented(getattr(mod, name)), f"{module}.{name}"
