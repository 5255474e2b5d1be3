"""An agent's whole configuration as plain data (dict / YAML), by import path.

As Haystack's component ``to_dict``/``from_dict``: ``agent_to_dict`` writes the model
(class path + constructor parameters), tools, hooks, middleware, prompts, exit conditions,
state schema, response format, ``max_agent_steps``, ``generation_kwargs``, the name and
the ``streaming_callback`` (when one is set).
Code is written as ``"module:qualname"`` import paths; it is never pickled or evaluated.

Two safety rules:

- **No secret is ever written.** A model's API key becomes ``{"env": "NAME"}``, the
  environment variable it is read from; a literal key found in no environment variable
  is refused. Any other string value under a secret-looking key is refused too.
- **Loading imports only what the caller allows.** A config file is data, maybe from
  someone else; loading it must not import arbitrary modules (an import runs module
  code) nor call arbitrary functions. ``agent_from_dict`` imports a path only when its
  module is ``threadloom`` or under a prefix the caller lists in ``allowed_modules``, and
  only if the object it finds was defined in such a module (so ``myapp.tools:os.system``
  is refused). Names starting with ``_`` are never followed.

The checkpointer is a live resource, not configuration: it is not written; pass
``checkpointer=`` when loading.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import yaml

from threadloom.agent.hooks import normalize_hooks
from threadloom.agent.serialize_refs import (
    import_path,
    load_path,
    tool_from_data,
    tool_to_data,
    type_from_data,
    type_to_data,
)
from threadloom.agent.serialize_secrets import (
    env_name_of,
    headers_to_data,
    refuse_secrets,
)
from threadloom.agent.state import default_handler
from threadloom.errors import SecurityError, SerializationError
from threadloom.messages import AIMessage, message_from_dict, message_to_dict
from threadloom.redact import mask_url

FORMAT_VERSION = 1
AGENT_TYPE = "threadloom.agent:Agent"
_OPENAI_FIELDS = ("model", "base_url", "organization", "timeout", "max_retries",
                  "empty_content", "merge_system_messages", "tool_calling", "default_headers",
                  "include_reasoning", "streaming")


# -- what each path may name ---------------------------------------------------------------
def _load(path: Any, allowed: Iterable[str], what: str, ok: Callable[[Any], bool],
          expected: str) -> Any:
    """``load_path``, then refuse an object of the wrong kind (a config naming, say, a
    checkpointer class as its "model" must not get it constructed)."""
    obj = load_path(path, allowed, what)
    if not ok(obj):
        raise SecurityError(f"{what}: {path!r} is not {expected}")
    return obj


def _is_class(obj: Any) -> bool:
    return isinstance(obj, type)


def _is_function(obj: Any) -> bool:
    return inspect.isfunction(obj) or inspect.ismethod(obj)


def _is_model_class(obj: Any) -> bool:
    from threadloom.models.base import BaseChatModel

    return isinstance(obj, type) and (issubclass(obj, BaseChatModel)
                                      or callable(getattr(obj, "from_dict", None)))


def _is_middleware(obj: Any) -> bool:
    from threadloom.agent.middleware import AgentMiddleware

    return isinstance(obj, AgentMiddleware)


def _is_middleware_class(obj: Any) -> bool:
    from threadloom.agent.middleware import AgentMiddleware

    return isinstance(obj, type) and issubclass(obj, AgentMiddleware)


# -- models --------------------------------------------------------------------------------
def model_to_dict(model: Any, *, api_key_env: str | None = None) -> dict[str, Any]:
    """``{"type": path, "init_parameters": {...}}`` for a chat model.

    Supported: any model with ``to_dict()``, ``OpenAIChatModel`` (API key as
    ``{"env": NAME}``), ``ScriptedChatModel`` with a list script.

    Raises:
        SerializationError: another model class, a callable script, an ``http_client``.
        SecurityError: a literal key found in no environment variable, or a ``base_url``
            with a password or a secret-looking query value.
    """
    from threadloom.models.openai import OpenAIChatModel
    from threadloom.models.scripted import ScriptedChatModel

    if callable(getattr(model, "to_dict", None)):
        return refuse_secrets(dict(model.to_dict()), "model")
    path = import_path(type(model), "model class")
    if isinstance(model, OpenAIChatModel):
        if model.http_client is not None:
            raise SerializationError("cannot serialize an OpenAIChatModel with an http_client")
        params = {f: getattr(model, f) for f in _OPENAI_FIELDS}
        params.update(model.generation_kwargs)
        params["default_headers"] = headers_to_data(params["default_headers"])
        refuse_secrets(params, "model")
        base_url = params.get("base_url")
        if isinstance(base_url, str) and mask_url(base_url) != base_url:
            raise SecurityError(
                f"refusing to serialize model.base_url {mask_url(base_url)!r}: it carries a "
                "password or a secret query value; pass them at run time (e.g. in "
                "OPENAI_BASE_URL) instead")
        secret = model._api_key.get_secret_value() if model._api_key is not None else None
        if secret is not None:
            params["api_key"] = {"env": env_name_of(secret, api_key_env)}
        return {"type": path, "init_parameters": params}
    if isinstance(model, ScriptedChatModel):
        if callable(model.script):
            raise SerializationError("cannot serialize a ScriptedChatModel with a callable script")
        script = [_script_entry(e) for e in model.script]
        return {"type": path, "init_parameters": {"script": script, "name": model.name}}
    raise SerializationError(
        f"cannot serialize model {type(model).__name__}: give it a to_dict() method returning "
        "{'type': 'module:Class', 'init_parameters': {...}} (and from_dict)")


def _script_entry(entry: Any) -> Any:
    if isinstance(entry, AIMessage):
        return message_to_dict(entry)
    if isinstance(entry, str | Mapping):  # a reply text, or a dict with its shortcuts
        return refuse_secrets(entry, "model.script")
    raise SerializationError(f"cannot serialize scripted reply {entry!r}")


def model_from_dict(data: Mapping[str, Any], allowed_modules: Iterable[str]) -> Any:
    """Rebuild a model written by ``model_to_dict``; ``{"env": NAME}`` values are read
    from the environment.

    Raises:
        SecurityError / SerializationError: see ``load_path``.
        ValueError: a named environment variable is not set.
    """
    from threadloom.models.scripted import ScriptedChatModel

    cls = _load(data.get("type"), allowed_modules, "model", _is_model_class,
                "a chat model class (BaseChatModel, or a class with from_dict)")
    params = {k: _from_env(v, k) for k, v in dict(data.get("init_parameters") or {}).items()}
    from threadloom.agent.generator import ChatGeneratorModel

    if isinstance(cls, type) and issubclass(cls, ChatGeneratorModel):
        return cls.load(params, allowed_modules)
    if callable(getattr(cls, "from_dict", None)):
        return cls.from_dict(dict(data))
    if isinstance(cls, type) and issubclass(cls, ScriptedChatModel):
        params["script"] = [message_from_dict(dict(e)) if isinstance(e, Mapping) and "type" in e
                            else e for e in params.get("script", [])]
    return cls(**params)


def _from_env(value: Any, key: str) -> Any:
    if key == "default_headers" and isinstance(value, Mapping):
        return {name: _from_env(v, f"default_headers.{name}") for name, v in value.items()}
    if isinstance(value, Mapping) and set(value) == {"env"}:
        name = value["env"]
        if name not in os.environ:
            raise ValueError(f"model parameter {key!r} is read from the environment variable "
                             f"{name!r}, which is not set")
        return os.environ[name]
    return value


# -- state schemas ------------------------------------------------------------------------
def schema_to_data(schema: Any) -> Any:
    """A ``state_schema`` as data: a class by path, a dict entry by entry."""
    if schema is None:
        return None
    if isinstance(schema, type):
        return import_path(schema, "state_schema")
    result = {}
    for key, entry in schema.items():
        tp = entry["type"] if isinstance(entry, Mapping) else entry
        item: dict[str, Any] = {"type": type_to_data(tp)}
        handler = entry.get("handler") if isinstance(entry, Mapping) else None
        if handler is not None and handler is not default_handler(key, tp):
            item["handler"] = import_path(handler, f"handler of state key {key!r}")
        result[key] = item
    return result


def schema_from_data(data: Any, allowed_modules: Iterable[str]) -> Any:
    """Inverse of ``schema_to_data``."""
    if data is None:
        return None
    if isinstance(data, str):
        return _load(data, allowed_modules, "state_schema", _is_class, "a class")
    result = {}
    for key, item in data.items():
        entry = {"type": type_from_data(item["type"], allowed_modules)}
        if item.get("handler") is not None:
            entry["handler"] = _load(item["handler"], allowed_modules, f"handler {key!r}",
                                     _is_function, "a function")
        result[key] = entry
    return result


# -- the agent -----------------------------------------------------------------------------
def _paths(objs: Iterable[Any] | None, what: str) -> list[str]:
    return [import_path(o, what) for o in objs or ()]


def _middleware_to_data(mw: Any) -> str | dict[str, Any]:
    if hasattr(mw, "__wrapped__"):  # made by @before_model etc.: the module holds it
        return import_path(mw, "middleware")
    if callable(getattr(mw, "to_dict", None)):
        return refuse_secrets(dict(mw.to_dict()), "middleware")
    cls = type(mw)
    if _init_takes_no_args(cls) and not vars(mw):
        return {"type": import_path(cls, "middleware class")}
    raise SerializationError(
        f"cannot serialize middleware {mw.name!r}: its constructor takes parameters; give "
        "it to_dict()/from_dict, or define a module-level instance made with a decorator")


def _init_takes_no_args(cls: type) -> bool:
    params = list(inspect.signature(cls).parameters.values())
    return all(p.default is not p.empty or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
               for p in params)


def _middleware_from_data(item: Any, allowed: Iterable[str]) -> Any:
    if isinstance(item, str):
        return _load(item, allowed, "middleware", _is_middleware, "an AgentMiddleware")
    cls = _load(item.get("type"), allowed, "middleware", _is_middleware_class,
                "an AgentMiddleware class")
    if "init_parameters" in item or callable(getattr(cls, "from_dict", None)):
        return cls.from_dict(dict(item))
    return cls()


def agent_to_dict(agent: Any, *, api_key_env: str | None = None) -> dict[str, Any]:
    """Write an agent's configuration as JSON/YAML-able data.

    Args:
        agent: an agent from ``create_agent`` (its ``.config`` holds the arguments).
        api_key_env: the environment variable holding the model's literal API key (found
            by value when omitted).

    Returns:
        ``{"type": "threadloom.agent:Agent", "version": 1, "init_parameters": {...}}``.

    Raises:
        SerializationError: something without an import path (a lambda tool, a local
            hook, a model without ``to_dict``).
        SecurityError: a secret would be written.
    """
    cfg = dict(agent.config)
    hooks = {point: _paths(fns, f"{point} hook")
             for point, fns in normalize_hooks(cfg.get("hooks")).items() if fns}
    fmt = cfg.get("response_format")
    params: dict[str, Any] = {
        "model": model_to_dict(cfg["model"], api_key_env=api_key_env),
        "tools": [tool_to_data(t) for t in cfg.get("tools") or ()],
        "system_prompt": cfg.get("system_prompt"),
        "user_prompt": cfg.get("user_prompt"),
        "required_variables": cfg.get("required_variables"),
        "state_schema": schema_to_data(cfg.get("state_schema")),
        "response_format": fmt if fmt is None or isinstance(fmt, Mapping)
        else import_path(fmt, "response_format"),
        "exit_conditions": list(cfg.get("exit_conditions") or ["text"]),
        "max_agent_steps": cfg.get("max_agent_steps", 100),
        "hooks": hooks or None,
        "middleware": [_middleware_to_data(m) for m in cfg.get("middleware") or ()],
        "name": cfg.get("name"),
        "generation_kwargs": refuse_secrets(dict(cfg.get("generation_kwargs") or {}),
                                             "generation_kwargs"),
    }
    if cfg.get("tool_concurrency_limit") is not None:
        params["tool_concurrency_limit"] = cfg["tool_concurrency_limit"]
    if cfg.get("streaming_callback") is not None:  # as Haystack's, by import path
        params["streaming_callback"] = import_path(cfg["streaming_callback"],
                                                   "streaming_callback")
        params["enable_streaming_callback_passthrough"] = bool(
            cfg.get("enable_streaming_callback_passthrough"))
    return {"type": AGENT_TYPE, "version": FORMAT_VERSION, "init_parameters": params}


def agent_from_dict(data: Mapping[str, Any], *, allowed_modules: Sequence[str] = (),
                    checkpointer: Any = None, **overrides: Any) -> Any:
    """Build an agent from ``agent_to_dict`` data, importing only allowed modules.

    Args:
        data: the dict.
        allowed_modules: module prefixes whose objects may be imported (``"myapp"``
            allows ``myapp`` and ``myapp.*``); ``threadloom`` is always allowed.
        checkpointer: the checkpointer to run with (never stored).
        **overrides: ``create_agent`` arguments that replace stored ones.

    Raises:
        SecurityError: a path outside the allowed modules.
        SerializationError: an unknown format or version, a path that does not import.
        ValueError: an environment variable named for a secret is not set.
    """
    from threadloom.agent.builder import create_agent

    if data.get("type") != AGENT_TYPE or data.get("version") != FORMAT_VERSION:
        raise SerializationError(f"not a threadloom agent config (type {data.get('type')!r}, "
                                 f"version {data.get('version')!r}; expected {AGENT_TYPE!r} "
                                 f"version {FORMAT_VERSION})")
    p = dict(data.get("init_parameters") or {})
    allowed = tuple(allowed_modules)
    fmt = p.get("response_format")
    kwargs: dict[str, Any] = {
        "system_prompt": p.get("system_prompt"), "user_prompt": p.get("user_prompt"),
        "required_variables": p.get("required_variables", "*"),
        "state_schema": schema_from_data(p.get("state_schema"), allowed),
        "response_format": fmt if fmt is None or isinstance(fmt, Mapping)
        else _load(fmt, allowed, "response_format", _is_class, "a class"),
        "exit_conditions": p.get("exit_conditions") or ["text"],
        "max_agent_steps": p.get("max_agent_steps", 100),
        "hooks": {pt: [_load(h, allowed, f"{pt} hook", _is_function, "a function")
                       for h in hs]
                  for pt, hs in (p.get("hooks") or {}).items()} or None,
        "middleware": [_middleware_from_data(m, allowed) for m in p.get("middleware") or ()]
        or None,
        "checkpointer": checkpointer, "name": p.get("name"),
        "generation_kwargs": p.get("generation_kwargs") or None,
        "tool_concurrency_limit": p.get("tool_concurrency_limit"),
        "streaming_callback": None if p.get("streaming_callback") is None else _load(
            p["streaming_callback"], allowed, "streaming_callback", _is_function, "a function"),
        "enable_streaming_callback_passthrough": bool(
            p.get("enable_streaming_callback_passthrough")),
    }
    model = overrides.pop("model", None) or model_from_dict(p["model"], allowed)
    tools = overrides.pop("tools", None)
    if tools is None:
        tools = [tool_from_data(t, allowed) for t in p.get("tools") or ()]
    kwargs.update(overrides)
    return create_agent(model, tools, **kwargs)


def to_yaml(agent: Any, **kwargs: Any) -> str:
    """``agent_to_dict`` as YAML (``yaml.safe_dump``)."""
    return yaml.safe_dump(agent_to_dict(agent, **kwargs), sort_keys=False, allow_unicode=True)


def from_yaml(text: str, **kwargs: Any) -> Any:
    """``agent_from_dict`` of YAML text read with ``yaml.safe_load`` (no tags, no code)."""
    data = yaml.safe_load(text)
    if not isinstance(data, Mapping):
        raise SerializationError("the YAML text does not hold a mapping")
    return agent_from_dict(data, **kwargs)


__all__ = [
    "agent_from_dict", "agent_to_dict", "from_yaml", "import_path", "load_path",
    "model_from_dict", "model_to_dict", "schema_from_data", "schema_to_data", "to_yaml",
    "type_from_data", "type_to_data",
]
