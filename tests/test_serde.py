"""The closed codec: round trips, refusals, forged envelopes, encryption, code bans."""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
import enum
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal, Optional, TypedDict
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from threadloom.checkpoint.serde import TAG, Codec, dumps, loads
from threadloom.errors import SecurityError, SerializationError, UntrustedTypeError

PACKAGE = Path(__file__).resolve().parents[1] / "threadloom"

any_char = st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(any_char)
)
keys = st.one_of(
    st.text(any_char, max_size=8), st.just(TAG), st.sampled_from(["v", "c", "__tl__x"])
)
json_like = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(keys, inner, max_size=5),
        st.fixed_dictionaries({TAG: st.sampled_from(["model", "dt", "map", "x"]), "v": inner}),
        st.fixed_dictionaries({TAG: st.just("model"), "c": st.just("os.system"), "v": inner}),
    ),
    max_leaves=30,
)
rich_scalars = st.one_of(
    json_scalars,
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.uuids(),
    st.decimals(allow_nan=False),
    st.binary(max_size=20),
    st.floats(),
)
rich = st.recursive(
    rich_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.frozensets(st.integers(), max_size=4),
        st.sets(st.text(max_size=4), max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=4),
    ),
    max_leaves=20,
)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())  # type: ignore[index,union-attr]
    if isinstance(a, dt.datetime | dt.time):
        return a == b and a.utcoffset() == b.utcoffset() and a.tzinfo == b.tzinfo or (  # type: ignore[union-attr]
            a == b and str(a) == str(b)
        )
    return a == b


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_json_like_values_round_trip_including_forged_looking_dicts(value: object) -> None:
    assert _same(loads(dumps(value)), value)


@settings(max_examples=300, deadline=None)
@given(rich)
def test_supported_types_round_trip_with_their_types(value: object) -> None:
    assert _same(loads(dumps(value)), value)


def test_plain_json_is_written_compactly_and_unchanged() -> None:
    value = {"a": [1, 2.5, None, True], "b": {"c": "d"}}
    assert dumps(value) == b'{"a":[1,2.5,null,true],"b":{"c":"d"}}'


def test_lone_surrogates_and_emoji_round_trip() -> None:
    for text in ["\ud800", "a\udfffb", "\U0001f600", "\ud83d\ude00", "mixed \ud800 \U0001f600 é"]:
        data = dumps({"t": text, "l": [text]})
        data.decode("utf-8")  # always valid UTF-8 on disk
        assert loads(data) == {"t": text, "l": [text]}


def test_datetimes_keep_offsets_zones_and_naivety() -> None:
    paris = dt.datetime(2026, 3, 29, 1, 30, tzinfo=ZoneInfo("Europe/Paris"))
    naive = dt.datetime(2026, 1, 1, 12)
    fixed = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-3)))
    back = loads(dumps([paris, naive, fixed, dt.time(1, 2, tzinfo=dt.UTC)]))
    assert back[0] == paris and back[0].tzinfo == ZoneInfo("Europe/Paris")
    assert back[1] == naive and back[1].tzinfo is None
    assert back[2].utcoffset() == dt.timedelta(hours=-3)
    assert back[3].tzinfo is not None


class Color(enum.Enum):
    RED = "red"


class Mode(enum.StrEnum):
    FAST = "fast"


class Inner(BaseModel):
    color: Color


class Outer(BaseModel):
    inner: Inner
    when: dt.datetime


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: list[Mode] = dataclasses.field(default_factory=list)
    c: int = dataclasses.field(default=0, init=False)


class Schema(TypedDict):
    outer: Optional[Outer]  # noqa: UP045 - the walker must handle Optional too
    frozen: Annotated[list[Frozen], "reducer"]
    lit: Literal[Mode.FAST]


def test_register_from_annotation_walks_schema_types() -> None:
    codec = Codec(inherit_global=False)
    codec.register_from_annotation(Schema)
    value = {
        "outer": Outer(inner=Inner(color=Color.RED), when=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
        "frozen": [Frozen(1, [Mode.FAST])],
        "mode": Mode.FAST,
    }
    back = codec.loads(codec.dumps(value))
    assert back == value
    assert type(back["mode"]) is Mode and back["outer"].inner.color is Color.RED
    assert type(back["frozen"][0].b[0]) is Mode


def test_unregistered_and_unsupported_types_fail_at_write_with_path() -> None:
    codec = Codec(inherit_global=False)
    with pytest.raises(SerializationError) as err:
        codec.dumps({"items": [1, 2, {"when": Color.RED}]}, path="channel_values")
    assert err.value.path == "channel_values.items[2].when"
    assert err.value.type_name.endswith("Color")
    assert "register" in str(err.value)
    with pytest.raises(SerializationError) as err:
        codec.dumps([{1: object()}])
    assert err.value.path == "[0][1]" and err.value.type_name == "builtins.object"
    for bad in [bytearray(b"x"), lambda: 1, type, ..., [Frozen(1)]]:
        with pytest.raises(SerializationError):
            codec.dumps(bad)


def test_register_rejects_arbitrary_classes() -> None:
    with pytest.raises(SerializationError):
        Codec().register(dict)
    with pytest.raises(SerializationError):
        Codec().register(Path)


@pytest.mark.parametrize(
    "forged",
    [
        b'{"__tl__":"model","c":"os.system","v":{"command":"touch SENTINEL"}}',
        b'{"__tl__":"dc","c":"subprocess.Popen","v":{"args":["touch","SENTINEL"]}}',
        b'{"__tl__":"nt","c":"builtins.eval","v":["1"]}',
        b'{"__tl__":"enum","c":"os.system","v":"x"}',
        b'{"__tl__":"method","c":"os.system","m":"__call__","v":["touch SENTINEL"]}',
        b'{"__tl__":"model","c":["os","system"],"v":{}}',
        b'{"__tl__":"import","v":"subprocess"}',
        b'{"__tl__":7,"v":1}',
        b'[{"a":{"__tl__":"model","c":"tests.test_serde.Outer","v":{}}}]',
    ],
)
def test_forged_envelopes_are_refused_and_nothing_runs(
    forged: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    modules = set(sys.modules)
    with pytest.raises(UntrustedTypeError) as err:
        loads(forged)
    assert isinstance(err.value, SecurityError) and isinstance(err.value, SerializationError)
    assert not (tmp_path / "SENTINEL").exists()
    assert set(sys.modules) == modules


def test_envelope_with_unknown_field_returns_data_or_raises() -> None:
    codec = Codec(inherit_global=False)
    codec.register(Inner)
    blob = b'{"__tl__":"model","c":"%s","v":{"color":{"__tl__":"enum","c":"%s","v":"red"},' \
        b'"evil":"x"}}' % (
            f"{Inner.__module__}.Inner".encode(),
            f"{Color.__module__}.Color".encode(),
        )
    assert codec.loads(blob) == Inner(color=Color.RED)
    with pytest.raises(SerializationError):
        name = f"{Color.__module__}.Color".encode()
        codec.loads(b'{"__tl__":"enum","c":"%s","v":"green"}' % name)


def test_bad_envelopes_raise_serialization_error() -> None:
    for blob in [b'{"__tl__":"dt","v":"yesterday"}', b'{"__tl__":"b","v":"***"}',
                 b'{"__tl__":"set","v":[[1]]}', b'{"__tl__":"f","v":"1e3"}', b"not json"]:
        with pytest.raises(SerializationError):
            loads(blob)


def test_encrypted_mode_round_trips_and_rejects_plaintext() -> None:
    key = 0x5A

    def xor(data: bytes) -> bytes:
        return bytes(b ^ key for b in data)

    codec = Codec(encrypt=xor, decrypt=xor)
    blob = codec.dumps({"secret": "value", "when": dt.date(2026, 1, 1)})
    assert b"secret" not in blob
    assert codec.loads(blob) == {"secret": "value", "when": dt.date(2026, 1, 1)}
    with pytest.raises(SerializationError, match="plaintext"):
        codec.loads(dumps({"secret": "value"}))
    with pytest.raises(SerializationError, match="encrypted"):
        loads(blob)
    with pytest.raises(ValueError):
        Codec(encrypt=xor)


def test_messages_round_trip_with_types() -> None:
    from threadloom.messages import AIMessage, HumanMessage, ToolMessage

    msgs = [
        HumanMessage("hi \ud800", id="1"),
        AIMessage("", id="2", tool_calls=[{"name": "f", "args": {"d": 1}, "id": "c"}]),
        ToolMessage("ok", tool_call_id="c", artifact={"when": dt.date(2026, 1, 1)}),
    ]
    back = loads(dumps(msgs))
    assert back == msgs and [type(m) for m in back] == [type(m) for m in msgs]
    assert back[2].artifact["when"] == dt.date(2026, 1, 1)


def test_plain_values_are_shared_not_copied() -> None:
    codec = Codec()
    value = {"a": [1, {"b": "c"}]}
    assert codec.to_json(value) is value
    with_date = {"a": [1, {"b": "c"}], "d": dt.date(2026, 1, 1)}
    tree = codec.to_json(with_date)
    assert tree["a"] is with_date["a"] and tree["d"] == {TAG: "d", "v": "2026-01-01"}


def test_sets_are_written_in_a_stable_order() -> None:
    assert dumps({3, 1, 2}) == dumps({2, 3, 1}) == b'{"__tl__":"set","v":[1,2,3]}'
    assert loads(dumps({(1, "a"), (0, "b")})) == {(1, "a"), (0, "b")}


def test_engine_types_round_trip() -> None:
    from threadloom.types import Command, Interrupt, Send

    values = [Send("node", {"x": uuid.uuid4()}), Interrupt("ask?", "id-1"), Command(goto="a")]
    assert loads(dumps(values)) == values


def test_decimal_and_big_values() -> None:
    values = [Decimal("NaN"), Decimal("-0.000"), 2**200, -(2**70), float("inf"), -0.0]
    back = loads(dumps(values))
    assert str(back[0]) == "NaN" and str(back[1]) == "-0.000" and back[2:5] == values[2:5]
    assert str(back[5]) == "-0.0"


BANNED_MODULES = {"pickle", "marshal", "shelve", "dill", "cloudpickle"}
BANNED_CALLS = {"eval", "exec"}


def _violations(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] in BANNED_MODULES]
            found += [f"{where} import {name}" for name in names]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in BANNED_MODULES:
                found.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if name in BANNED_CALLS:
                found.append(f"{where} call {name}()")
        elif isinstance(node, ast.Assert):
            found.append(f"{where} assert")
        elif isinstance(node, ast.Name) and node.id == "__import__":
            found.append(f"{where} __import__")
    return found


def test_ast_ban_catches_what_it_should(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import pickle\nfrom marshal import loads\nimport dill.x\neval('1')\n"
        "builtins.exec('x')\nassert x\n__import__('os')\nimport json\n"
    )
    assert len(_violations(sample, tmp_path)) == 7


def test_no_pickle_eval_exec_or_assert_in_threadloom() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 5, "package not found"
    problems = [v for f in files for v in _violations(f)]
    assert problems == [], "\n".join(problems)
