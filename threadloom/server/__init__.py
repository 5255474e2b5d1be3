"""``threadloom serve``: graphs behind the HTTP API that LangGraph's SDK calls.

Assistants, threads, runs (background, streamed over SSE, waited), state and history,
interrupts resumed with ``command``, double-texting strategies, resumable streams, API
keys and owners, and an OpenAI-compatible face. See ``docs/server.md``.

Needs the ``server`` extra (``pip install 'threadloom[server]'``).
"""

from threadloom.server.app import create_app
from threadloom.server.auth import KeyAuth, Principal, hash_key
from threadloom.server.config import ConfigError, ServerConfig
from threadloom.server.serve import open_app, serve

__all__ = ["ConfigError", "KeyAuth", "Principal", "ServerConfig", "create_app", "hash_key",
           "open_app", "serve"]
