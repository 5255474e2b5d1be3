"""The closed JSON codec every checkpointer stores values with.

``dumps(value) -> bytes`` writes compact UTF-8 JSON; ``loads(data) -> value`` reads it
back. Plain JSON values (str, int, finite float, bool, None, lists, dicts with str keys)
are written as themselves. Everything else is written as a tagged envelope
``{"__tl__": tag, ...}`` and is one of a closed set:

==========  ===========================================================================
tag         value
==========  ===========================================================================
``dt``      ``datetime`` (naive or aware; the UTC offset is kept, a ``ZoneInfo`` key too)
``d``       ``date``          ``t``   ``time``          ``td``  ``timedelta``
``uuid``    ``UUID``          ``dec`` ``Decimal``       ``b``   ``bytes`` (base64)
``f``       non-finite float  ``set`` / ``fset`` / ``tup``: set, frozenset, tuple
``int``     an int of more than about 4,200 digits, as hex (decimal ones that long
            cannot be read back by Python's ``json``)
``map``     a dict with non-str keys, or with the key ``"__tl__"`` (escaped as pairs)
``sur``     a str holding surrogate code points (kept exactly, as UTF-8 surrogatepass)
``msg``     a threadloom message (``threadloom.messages``)
``enum``    a member of a *registered* ``Enum`` (``StrEnum``/``IntEnum`` included)
``model``   an instance of a *registered* pydantic model
``dc``      an instance of a *registered* dataclass
``nt``      an instance of a *registered* ``NamedTuple``
==========  ===========================================================================

Loading never imports a module and never builds a class that was not registered: an
envelope naming ``os.system`` or any class outside the allow-list raises
``UntrustedTypeError``, a subclass of both ``SerializationError`` and ``SecurityError``.
Writing a value of an unsupported or unregistered type raises ``SerializationError``
naming the path (``channel_values.items[2].when``) and the type, before anything is
stored. Unlike LangGraph's ``JsonPlusSerializer`` there is no pickle fallback and the
strict allow-list is the default, not an opt-in.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json as _FAST_DUMPS

from threadloom.checkpoint.depth import MAX_DEPTH, depth, room
from threadloom.checkpoint.serde_builtin import (
    BIG_INT,
    SIMPLE_ENCODERS,
    TAG,
    enc_big_int,
    escape_surrogates,
)
from threadloom.checkpoint.serde_messages import message_tree
from threadloom.checkpoint.serde_read import ENCRYPTED_PREFIX, CodecReader
from threadloom.checkpoint.typereg import TypeRegistry, is_message_class, qualified_name
from threadloom.errors import SerializationError
from threadloom.messages.spellings import ToolCallView
from threadloom.types import Command, Interrupt, Overwrite, Send

_JSON_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _slow_dumps(tree: Any, path: str) -> bytes:
    try:
        with room(2 * MAX_DEPTH):
            return _JSON_DUMPS(tree).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: stored as tagged UTF-8 bytes
        return _JSON_DUMPS(escape_surrogates(tree)).encode("utf-8")
    except ValueError as exc:
        where = path or "value"
        raise SerializationError(f"cannot serialize {where}: {exc}", path=path) from exc


class _Unsupported(Exception):
    """Internal: an unsupported value; carries the path segments, innermost last."""

    def __init__(self, type_name: str, reason: str) -> None:
        super().__init__(reason)
        self.type_name = type_name
        self.reason = reason
        self.segments: list[str] = []


def _key_segment(key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"


class Codec(CodecReader):
    """A closed JSON codec with an explicit allow-list of user types.

    Args:
        encrypt: optional ``bytes -> bytes`` applied to every written blob; blobs are then
            stored as ``b"TLENC1:" + encrypt(json)``.
        decrypt: the inverse of ``encrypt``. With it set, loading a blob that lacks the
            encrypted prefix raises ``SerializationError`` (no plaintext is accepted).
        inherit_global: also allow the types registered with the module-level
            ``register()`` (default True).

    Registered names are ``module.QualName`` (or the ``name=`` given to ``register``); a
    later registration under the same name replaces the earlier class (a notebook cell
    that redefines a model keeps working).
    """

    def __init__(
        self,
        *,
        encrypt: Callable[[bytes], bytes] | None = None,
        decrypt: Callable[[bytes], bytes] | None = None,
        inherit_global: bool = True,
    ) -> None:
        if (encrypt is None) != (decrypt is None):
            raise ValueError("Codec needs both encrypt= and decrypt=, or neither")
        self.encrypt = encrypt
        self.decrypt = decrypt
        self.registry = TypeRegistry(parent=_GLOBAL_REGISTRY if inherit_global else None)
        self._encoders: dict[type, Callable[[Any], Any]] = {}

    # -- registration ---------------------------------------------------------------------

    def register(self, cls: type, *, name: str | None = None) -> type:
        """Allow ``cls`` (pydantic model, dataclass, Enum or NamedTuple) to be stored.

        The field types of a model/dataclass/NamedTuple are registered too. Usable as a
        class decorator. Returns ``cls``.

        Raises:
            SerializationError: ``cls`` is none of the supported kinds.
        """
        self.registry.register(cls, name=name)
        self._encoders.clear()
        return cls

    def register_from_annotation(self, tp: Any) -> None:
        """Register every model, dataclass, enum and NamedTuple a type annotation names.

        Walks ``Annotated``, ``Optional``/unions, ``list``/``dict``/``set``/``tuple``
        arguments, ``Literal`` enum members, TypedDict and pydantic/dataclass fields. The
        engine calls this with the state schema, so the types it names round-trip.
        """
        self.registry.register_annotation(tp)
        self._encoders.clear()

    # -- writing --------------------------------------------------------------------------

    def dumps(self, value: Any, *, path: str = "") -> bytes:
        """Encode ``value`` to bytes.

        Args:
            value: any value made of the supported types.
            path: where the value sits, prefixed to error paths (e.g. ``"channel_values.x"``).

        Raises:
            SerializationError: a value of an unsupported or unregistered type; ``path``
                and ``type_name`` name it.
        """
        t = type(value)
        try:  # _enc, its first dispatch inlined: a step's writes are mostly small values
            if t is dict:
                tree = self._enc_dict(value)
            elif t is list:
                tree = self._enc_list(value)
            elif t is str or t is bool or value is None or (
                    t is int and -BIG_INT < value < BIG_INT):
                tree = value
            else:
                tree = self._enc(value)
        except (_Unsupported, RecursionError):
            tree = self._deep_tree(value, path)  # or raises the error naming the path
        try:
            # The tree is plain JSON by now; pydantic-core writes it ~4x faster than the
            # stdlib, to the same compact form (a float may show its exponent as e-7
            # rather than e-07: the same number).
            data = _FAST_DUMPS(tree)
        except Exception:  # noqa: BLE001 - lone surrogates, very deep trees: slow path
            data = _slow_dumps(tree, path)
        if self.encrypt is not None:
            return ENCRYPTED_PREFIX + self.encrypt(data)
        return data

    def _deep_tree(self, value: Any, path: str) -> Any:
        """``to_json`` given the room for ``MAX_DEPTH`` levels whatever the caller's stack
        (see ``depth``); a value nested deeper is refused, naming ``path``."""
        with room(4 * MAX_DEPTH):
            tree = self.to_json(value, path=path)
        levels = depth(tree)
        if levels > MAX_DEPTH:
            raise SerializationError(
                f"cannot serialize {path or 'value'}: nested {levels} levels deep; the "
                f"checkpoint codec stores at most {MAX_DEPTH}", path=path
            )
        return tree

    def dumps_plain(self, tree: Any) -> bytes:
        """Encode a tree the caller built of plain JSON only (str keys, never the tag key).

        The checkpointers use it for the bookkeeping they write themselves (checkpoint
        records, engine metadata) after checking that shape; it skips ``dumps``'s walk.
        Encryption applies as in ``dumps``.
        """
        data = _FAST_DUMPS(tree)
        if self.encrypt is not None:
            return ENCRYPTED_PREFIX + self.encrypt(data)
        return data

    def to_json(self, value: Any, *, path: str = "") -> Any:
        """The JSON tree ``dumps`` writes (plain JSON parts are shared, not copied)."""
        try:
            return self._enc(value)
        except _Unsupported as exc:
            where = (path + "".join(reversed(exc.segments))).lstrip(".")
            raise SerializationError(
                f"cannot serialize {where or 'value'}: {exc.reason}",
                path=where,
                type_name=exc.type_name,
            ) from None
        except RecursionError:
            raise SerializationError(
                f"cannot serialize {path or 'value'}: nested too deeply or circular", path=path
            ) from None

    def _enc(self, v: Any) -> Any:
        t = type(v)
        if t is str or t is bool or v is None:
            return v
        if t is int:
            return v if -BIG_INT < v < BIG_INT else enc_big_int(v)
        if t is float:
            return v if math.isfinite(v) else {TAG: "f", "v": repr(v)}
        if t is list:
            return self._enc_list(v)
        if t is dict:
            return self._enc_dict(v)
        fn = self._encoders.get(t)
        if fn is None:
            fn = self._resolve_encoder(t)
            if fn is None:
                raise _refusal(t)
            self._encoders[t] = fn
        return fn(v)

    def _enc_list(self, v: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        enc = self._enc
        i = 0
        try:
            for i, item in enumerate(v):  # noqa: B007 - i is read by the except clause
                t = type(item)
                if (t is str or (t is int and -BIG_INT < item < BIG_INT) or t is bool
                        or item is None):  # as _enc, without a call
                    if out is not None:
                        out.append(item)
                    continue
                e = enc(item)
                if e is not item and out is None:
                    out = v[:i]
                if out is not None:
                    out.append(e)
        except _Unsupported as exc:
            exc.segments.append(f"[{i}]")
            raise
        return v if out is None else out

    def _enc_dict(self, v: dict[Any, Any]) -> Any:
        out: dict[str, Any] | None = None
        enc = self._enc
        key: Any = None
        try:
            for key, item in v.items():
                if type(key) is not str or key == TAG:
                    break
                t = type(item)
                if (t is str or (t is int and -BIG_INT < item < BIG_INT) or t is bool
                        or item is None):  # as _enc, without a call
                    if out is not None:
                        out[key] = item
                    continue
                e = enc(item)
                if e is not item and out is None:
                    out = {}
                    for k2, i2 in v.items():
                        if k2 is key:
                            break
                        out[k2] = i2
                if out is not None:
                    out[key] = e
            else:
                return v if out is None else out
        except _Unsupported as exc:
            exc.segments.append(_key_segment(key))
            raise
        return self._enc_pairs(v)

    def _enc_pairs(self, v: dict[Any, Any]) -> dict[str, Any]:
        pairs = []
        for key, item in v.items():
            try:
                pairs.append([self._enc(key), self._enc(item)])
            except _Unsupported as exc:
                exc.segments.append(_key_segment(key))
                raise
        return {TAG: "map", "v": pairs}

    def _resolve_encoder(self, t: type) -> Callable[[Any], Any] | None:
        simple = SIMPLE_ENCODERS.get(t)
        if simple is not None:
            return simple
        if t in (set, frozenset):
            tag = "set" if t is set else "fset"
            return lambda v: {TAG: tag, "v": self._sorted(self._enc_list(list(v)))}
        if t is tuple:
            return lambda v: {TAG: "tup", "v": self._enc_list(list(v))}
        if t is ToolCallView:  # a tool call that also reads as Haystack's: its plain dict
            return lambda v: self._enc_dict(dict(v))
        if is_message_class(t):
            from threadloom.messages import message_to_dict  # resolved once per type

            enc_dict = self._enc_dict

            def enc_message(v: Any) -> Any:
                # message_tree: the same tree without model_dump, for the everyday shapes
                tree = message_tree(v)
                return {TAG: "msg", "v": enc_dict(message_to_dict(v)) if tree is None else tree}

            return enc_message
        name = self.registry.name_of(t)
        if name is None:
            return None
        if issubclass(t, enum.Enum):
            return lambda v: {TAG: "enum", "c": name, "v": self._enc(v.value)}
        if issubclass(t, BaseModel):
            return lambda v: {TAG: "model", "c": name, "v": self._enc_dict(dict(v))}
        if dataclasses.is_dataclass(t):
            return lambda v: {TAG: "dc", "c": name, "v": self._enc_dict(_dc_fields(v))}
        return lambda v: {TAG: "nt", "c": name, "v": self._enc_list(list(v))}

    @staticmethod
    def _sorted(items: list[Any]) -> list[Any]:
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))


def _refusal(t: type) -> _Unsupported:
    name = qualified_name(t)
    if issubclass(t, enum.Enum | BaseModel) or dataclasses.is_dataclass(t):
        reason = (
            f"type {name} is not registered with the checkpoint codec; register it with "
            "codec.register(...) or name it in the state schema"
        )
    else:
        reason = f"type {name} is not supported by the checkpoint codec"
    return _Unsupported(name, reason)


def _dc_fields(v: Any) -> dict[str, Any]:
    return {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}


_GLOBAL_REGISTRY = TypeRegistry(parent=None)
for _engine_type in (Send, Command, Interrupt, Overwrite):  # the engine's own values
    _GLOBAL_REGISTRY.register(_engine_type, name=f"threadloom.{_engine_type.__name__}")
_DEFAULT = Codec()


def register(cls: type, *, name: str | None = None) -> type:
    """Allow ``cls`` in every codec that inherits the global allow-list (decorator-friendly).

    See ``Codec.register``.
    """
    _GLOBAL_REGISTRY.register(cls, name=name)
    return cls


def dumps(value: Any, *, path: str = "") -> bytes:
    """Encode with the default codec (see ``Codec.dumps``)."""
    return _DEFAULT.dumps(value, path=path)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode with the default codec (see ``Codec.loads``)."""
    return _DEFAULT.loads(data)
