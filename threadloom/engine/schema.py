"""State schemas (TypedDict, dataclass, pydantic) turned into channel specs.

A field annotated ``Annotated[T, reducer]`` becomes a ``Reduced`` channel; a field carrying
the ``Ephemeral`` marker is cleared one step after it was written; any other field is a
``LastValue`` channel. As in LangGraph, the reducer is the callable found in the
``Annotated`` metadata; a reduced list/dict/set/int/str field starts from its type's empty
value, so ``state["messages"]`` is ``[]`` before anybody wrote it.

Any other schema (``list``, ``list[str]``, ``Annotated[list, operator.add]``, a messages
list) is a *root* schema, as LangGraph: the whole state is one channel, ``__root__``, and
nodes, ``invoke`` and ``get_state`` see the bare value (``CompiledGraph.root_state``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import operator
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin, get_type_hints

import typing_extensions

from threadloom.engine.channels import (
    MISSING,
    Channel,
    Ephemeral,
    LastValue,
    Reduced,
    UntrackedValue,
)
from threadloom.engine.managed import manager_of
from threadloom.errors import GraphBuildError, InvalidUpdateError
from threadloom.reducers.appends import add
from threadloom.types import ROOT

SchemaKind = Literal["typeddict", "dataclass", "pydantic", "dict", "root"]
_EMPTY_CONSTRUCTIBLE = (list, dict, set, tuple, int, float, str, frozenset)
# abstract collection types start empty as their concrete counterpart (as LangGraph's
# BinaryOperatorAggregate), so the first write goes through the reducer too
_CONCRETE: dict[Any, type] = {
    collections.abc.Sequence: list, collections.abc.MutableSequence: list,
    collections.abc.Set: set, collections.abc.MutableSet: set,
    collections.abc.Mapping: dict, collections.abc.MutableMapping: dict,
}


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """How to build one state key's channel.

    Attributes:
        key: the state key.
        annotation: the field's type, without ``Annotated`` metadata.
        reducer: the merge function, or None for a last-value channel.
        ephemeral: cleared one step after it was written.
        default: the initial value, or ``MISSING``.
        untracked: never checkpointed (``Annotated[T, UntrackedValue]``).
    """

    key: str
    annotation: Any
    reducer: Callable[[Any, Any], Any] | None
    ephemeral: bool
    default: Any
    untracked: bool = False

    def make(self) -> Channel:
        """The key's channel (its merge rule; the graph builds it once)."""
        if self.reducer is None:
            return LastValue(self.key, self.default, self.ephemeral)
        # operator.add itself, plus a note for the checkpointer that a long list grew by
        # appending (reducers/appends.py: its delta is then written without a compare)
        reducer = add if self.reducer is operator.add else self.reducer
        return Reduced(self.key, reducer, self.default, self.ephemeral)

    def initial_value(self) -> Any:
        """The value a run starts with (a mutable default is built anew), or ``MISSING``."""
        default = self.default
        return default() if type(default) is _Factory else default

    @property
    def fresh_initial(self) -> bool:
        """Whether the default is built anew for every run."""
        return type(self.default) is _Factory


class _Factory:
    """A default that must be built fresh for each run (mutable containers)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()


def schema_kind(schema: Any) -> SchemaKind:
    """Which kind of state schema ``schema`` is.

    A schema without annotations of its own (``list``, ``list[str]``, ``Annotated[...]``)
    is ``"root"``: the whole state is one value, as LangGraph.

    Raises:
        GraphBuildError: for a class with annotations that is none of TypedDict,
            dataclass, pydantic model.
    """
    if schema is dict:
        return "dict"
    if not hasattr(schema, "__annotations__"):
        return "root"
    if isinstance(schema, type):
        if typing.is_typeddict(schema) or typing_extensions.is_typeddict(schema):
            return "typeddict"
        if dataclasses.is_dataclass(schema):
            return "dataclass"
        if hasattr(schema, "model_fields") and hasattr(schema, "model_construct"):
            return "pydantic"
    raise GraphBuildError(
        f"state schema {schema!r} is not a TypedDict, dataclass or pydantic model"
    )


def channel_specs(schema: Any, localns: Mapping[str, Any] | None = None) -> dict[str, ChannelSpec]:
    """Read a state schema's fields into channel specs, in field order.

    Args:
        schema: the state schema class.
        localns: names to resolve string annotations with, for schemas defined inside a
            function under ``from __future__ import annotations`` (as pydantic does with
            the parent namespace).

    Raises:
        GraphBuildError: for an unsupported schema or an unreadable annotation.
    """
    kind = schema_kind(schema)
    if kind == "dict":
        return {}
    if kind == "root":
        return {ROOT: _spec(ROOT, schema, MISSING)}
    try:
        hints = get_type_hints(schema, localns=dict(localns or {}), include_extras=True)
    except Exception as exc:
        raise GraphBuildError(
            f"cannot read the type hints of {schema.__qualname__}: {exc}"
        ) from exc
    defaults = _field_defaults(schema, kind)
    specs: dict[str, ChannelSpec] = {}
    for key, hint in hints.items():
        if key.startswith("__") or (kind == "pydantic" and key not in schema.model_fields):
            continue
        if manager_of(hint) is not None:  # a managed value (engine.managed): no channel
            continue
        specs[key] = _spec(key, hint, defaults.get(key, MISSING))
    return specs


_REQUIRED_WRAPPERS = frozenset(
    w for mod in (typing, typing_extensions) for name in ("Required", "NotRequired", "ReadOnly")
    if (w := getattr(mod, name, None)) is not None
)


def _unwrap_required(hint: Any) -> Any:
    """``hint`` without ``Required[...]`` / ``NotRequired[...]`` / ``ReadOnly[...]`` around it
    (as LangGraph since 1.2: the reducer inside them still counts)."""
    while get_origin(hint) in _REQUIRED_WRAPPERS:
        hint = get_args(hint)[0]
    return hint


def _check_reducer(key: str, reducer: Any) -> None:
    """Refuse, as LangGraph does, a reducer that cannot take ``(current, update)``."""
    try:
        sig = inspect.signature(reducer)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    try:
        sig.bind(None, None)
    except TypeError:
        raise GraphBuildError(
            f"Invalid reducer signature for state key {key!r}. Expected (a, b) -> c. "
            f"Got {sig}") from None


def _spec(key: str, hint: Any, default: Any) -> ChannelSpec:
    hint = _unwrap_required(hint)
    base, reducer, ephemeral, untracked = hint, None, False, False
    if get_origin(hint) is typing.Annotated:
        base, *meta = get_args(hint)
        for item in meta:
            if item is Ephemeral or isinstance(item, Ephemeral):
                ephemeral = True
            elif item is UntrackedValue or isinstance(item, UntrackedValue):
                untracked = True
                if isinstance(item, UntrackedValue) and not item.guard:
                    reducer = _last  # several writes in a step: the last one stays
            elif callable(item) and not isinstance(item, type):
                reducer = item
            elif callable(getattr(item, "operator", None)) and hasattr(item, "from_checkpoint"):
                reducer = item.operator  # LangGraph's BinaryOperatorAggregate(typ, operator)
    if reducer is not None and reducer is not _last:
        _check_reducer(key, reducer)
    if reducer is not None and reducer is not _last and default is MISSING:
        origin = get_origin(base) or base
        origin = _CONCRETE.get(origin, origin)
        if origin in _EMPTY_CONSTRUCTIBLE:
            default = _Factory(origin) if origin in (list, dict, set) else origin()
    return ChannelSpec(key, base, reducer, ephemeral, default, untracked)


def _last(current: Any, update: Any) -> Any:
    return update


def _field_defaults(schema: Any, kind: SchemaKind) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "dataclass":
        for f in dataclasses.fields(schema):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = _Factory(f.default_factory)
    elif kind == "pydantic":
        for name, info in schema.model_fields.items():
            if info.default_factory is not None:
                out[name] = _Factory(info.default_factory)  # type: ignore[arg-type]
            elif not info.is_required():
                out[name] = info.default
    return out


def merge_specs(*groups: Mapping[str, ChannelSpec]) -> dict[str, ChannelSpec]:
    """Union of several schemas' specs; the first schema to name a key wins."""
    out: dict[str, ChannelSpec] = {}
    for group in groups:
        for key, spec in group.items():
            out.setdefault(key, spec)
    return out


def state_builder(schema: Any) -> Callable[[dict[str, Any]], Any]:
    """A function turning a dict of channel values into the form nodes receive.

    TypedDict and plain dict schemas get the dict itself; dataclasses are constructed;
    pydantic models are validated from the values, as LangGraph builds them (a node's
    dict for a nested model arrives as that model; validators run). Values that only
    lack required fields (not written yet) give ``model_construct``'s model.

    Raises (from the returned function):
        pydantic.ValidationError: the values do not fit the model.
    """
    kind = schema_kind(schema)
    if kind in ("typeddict", "dict"):
        return _identity
    if kind == "root":
        return _root_value
    if kind == "pydantic":
        return _model_builder(schema)
    names = {f.name for f in dataclasses.fields(schema)}

    def build_dataclass(values: dict[str, Any]) -> Any:
        try:
            return schema(**{k: v for k, v in values.items() if k in names})
        except TypeError as exc:
            raise InvalidUpdateError(
                f"cannot build state {schema.__qualname__} from keys {sorted(values)}: {exc}. "
                f"Give its fields defaults or pass them in the input."
            ) from exc

    return build_dataclass


def _model_builder(schema: Any) -> Callable[[dict[str, Any]], Any]:
    from pydantic import ValidationError

    fields = set(schema.model_fields)

    def build_model(values: dict[str, Any]) -> Any:
        picked = {k: v for k, v in values.items() if k in fields}
        try:
            return schema.model_validate(picked)
        except ValidationError as exc:
            if all(err["type"] == "missing" for err in exc.errors()):
                return schema.model_construct(**picked)
            raise

    return build_model


def _identity(values: dict[str, Any]) -> dict[str, Any]:
    return values


def _root_value(values: dict[str, Any]) -> Any:
    return values.get(ROOT)


def schema_keys(schema: Any) -> tuple[str, ...]:
    """The keys a schema names, in order (empty for ``dict``); annotations are not resolved."""
    kind = schema_kind(schema)
    if kind == "dict":
        return ()
    if kind == "root":
        return (ROOT,)
    if kind == "dataclass":
        return tuple(f.name for f in dataclasses.fields(schema))
    if kind == "pydantic":
        return tuple(schema.model_fields)
    return tuple(k for k in getattr(schema, "__annotations__", {}) if not k.startswith("__"))


def update_from_object(obj: Any) -> dict[str, Any] | None:
    """Turn a dataclass or pydantic instance returned by a node into an update dict.

    For a pydantic model a field counts, as in LangGraph, unless its value is ``None``, its
    default is ``None`` and it was not set explicitly (so a field filled by a non-``None``
    default or ``default_factory`` is an update). Returns None for other objects.
    """
    if hasattr(obj, "model_fields_set") and hasattr(obj, "model_dump"):
        given = obj.model_fields_set
        return {k: value for k, field in type(obj).model_fields.items()
                if (value := getattr(obj, k)) is not None or field.default is not None
                or k in given}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return None


def hinted_input_schema(action: Any, state_schema: Any, subgraph: Any = None) -> Any:
    """The schema a node function's first parameter is annotated with, or None: LangGraph
    reads a node's input schema from that hint, and the keys it has beyond the state
    become private channels. Only a typed schema (TypedDict, pydantic model, dataclass)
    counts; an unreadable hint is no hint."""
    import inspect

    if subgraph is not None:
        return None
    try:
        params = list(inspect.signature(action).parameters.values())
        fn = action if inspect.isroutine(action) else type(action).__call__
        hint = get_type_hints(fn).get(params[0].name) if params else None
    except Exception:  # noqa: BLE001 (a forward reference, a builtin: no hint to read)
        return None
    if not isinstance(hint, type) or hint is state_schema or hint is dict:
        return None
    try:
        kind = schema_kind(hint)
    except GraphBuildError:  # a plain class: not a schema
        return None
    return None if kind == "root" else hint
