"""Reading what the closed codec wrote: ``loads`` and the envelope revivers.

A mixin of ``Codec`` (``serde.py``, which documents the format). Loading never imports a
module and never builds a class that was not registered.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from threadloom.checkpoint.depth import MAX_DEPTH, room
from threadloom.checkpoint.serde_builtin import ENVELOPE_REVIVERS, SIMPLE_REVIVERS, TAG
from threadloom.checkpoint.typereg import TypeRegistry, qualified_name
from threadloom.errors import SerializationError, UntrustedTypeError

ENCRYPTED_PREFIX = b"TLENC1:"
_TAG_BYTES = TAG.encode()


_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's settings


def _plain_json(raw: bytes) -> Any:
    """``json.loads(raw)``, parsed by the scanner directly when ``raw`` is one UTF-8 JSON
    document with nothing around it (what the codec writes): ``json.loads``'s wrappers
    (encoding detection, whitespace matches) cost as much as the parse of a short record.
    Anything else goes to ``json.loads`` itself, which accepts or refuses it as ever."""
    try:
        text = raw.decode()
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError):  # (UnicodeDecodeError, JSONDecodeError too)
        return json.loads(raw)
    if end != len(text):
        return json.loads(raw)
    return value


class CodecReader:
    """``loads`` (mixed into ``Codec``)."""

    registry: TypeRegistry
    decrypt: Callable[[bytes], bytes] | None

    def loads(self, data: bytes | bytearray | memoryview | str) -> Any:
        """Decode bytes written by ``dumps``.

        Raises:
            UntrustedTypeError: the data names a class that is not registered, or an
                unknown tag; nothing is imported or constructed.
            SerializationError: the bytes are not valid codec output, encryption
                settings do not match the blob, or ``data`` is not bytes-like or str
                (say a number or None read from a database column meant for a blob).
        """
        if type(data) is bytes:
            raw = data
        elif isinstance(data, str):
            raw = data.encode("utf-8", "surrogatepass")
        elif isinstance(data, bytes | bytearray | memoryview):
            raw = bytes(data)
        else:
            name = type(data).__name__
            raise SerializationError(
                f"stored blob is of type {name!r}, not bytes", type_name=name
            )
        if self.decrypt is not None:
            if not raw.startswith(ENCRYPTED_PREFIX):
                raise SerializationError(
                    "refusing a plaintext blob: this codec is in encrypted mode"
                )
            try:
                raw = self.decrypt(raw[len(ENCRYPTED_PREFIX) :])
            except Exception as exc:
                raise SerializationError(f"could not decrypt blob: {exc}") from exc
        elif raw.startswith(ENCRYPTED_PREFIX):
            raise SerializationError("blob is encrypted; construct the Codec with decrypt=")
        try:
            return self._parse(raw)
        except RecursionError:
            pass
        with room(MAX_DEPTH + 50):  # the caller's stack was deep: give the parser room
            try:
                return self._parse(raw)
            except RecursionError:
                raise SerializationError(
                    f"stored blob is nested more than {MAX_DEPTH} levels deep: "
                    "threadloom never writes that deep"
                ) from None

    def _parse(self, raw: bytes) -> Any:
        try:
            if _TAG_BYTES in raw:
                return json.loads(raw, object_hook=self._revive)
            return _plain_json(raw)
        except (SerializationError, RecursionError):
            raise
        except ValueError as exc:
            raise SerializationError(f"stored blob is not valid codec JSON: {exc}") from exc

    def _revive(self, d: dict[str, Any]) -> Any:
        tag = d.get(TAG)
        if tag is None:
            return d
        try:
            if type(tag) is str:
                fn = SIMPLE_REVIVERS.get(tag)
                if fn is not None:
                    return fn(d["v"])
                env = ENVELOPE_REVIVERS.get(tag)
                if env is not None:
                    return env(d)
                if tag == "msg":
                    from threadloom.messages import message_from_dict

                    return message_from_dict(d["v"])
                if tag in ("enum", "model", "dc", "nt"):
                    return self._revive_registered(tag, d)
        except SerializationError:
            raise
        except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError) as exc:
            # a forged envelope: a timedelta of 10**12 days, a Decimal exponent beyond
            # the decimal module's range, a zone that does not exist, a field missing...
            what = f"{type(exc).__name__}: {exc}"
            raise SerializationError(f"bad {tag!r} envelope in stored data: {what}") from exc
        raise UntrustedTypeError(f"unknown type tag {tag!r} in stored data", type_name=str(tag))

    def _revive_registered(self, tag: str, d: dict[str, Any]) -> Any:
        name = d.get("c")
        cls = self.registry.lookup(name) if type(name) is str else None
        if cls is None:
            raise UntrustedTypeError(
                f"stored data names type {name!r}, which is not registered with the codec; "
                "refusing to load it (register it with Codec.register if it is yours)",
                type_name=str(name),
            )
        value = d["v"]
        if tag == "enum" and issubclass(cls, enum.Enum):
            return cls(value)
        if tag == "model" and issubclass(cls, BaseModel) and type(value) is dict:
            return _validate_model(cls, value)
        if tag == "dc" and dataclasses.is_dataclass(cls) and type(value) is dict:
            return _build_dataclass(cls, value)
        if tag == "nt" and issubclass(cls, tuple) and type(value) is list:
            return cls(*value)
        raise UntrustedTypeError(
            f"stored {tag!r} envelope does not match registered type {name!r}", type_name=str(name)
        )


def _build_dataclass(cls: Any, values: dict[str, Any]) -> Any:
    fields = dataclasses.fields(cls)
    init = {f.name: values[f.name] for f in fields if f.init and f.name in values}
    obj = cls(**init)
    for f in fields:
        if not f.init and f.name in values:
            object.__setattr__(obj, f.name, values[f.name])
    return obj


def _validate_model(cls: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    try:
        return cls.model_validate(values, by_name=True)  # type: ignore[call-arg]
    except TypeError:  # pydantic < 2.11 has no by_name
        return cls.model_validate(values)
    except Exception as exc:
        raise SerializationError(
            f"stored {qualified_name(cls)} no longer validates: {exc}",
            type_name=qualified_name(cls),
        ) from exc
