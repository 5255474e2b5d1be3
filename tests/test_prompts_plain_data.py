"""Templates see plain data only (issue 17): every object of the attack run, passed as a
variable, is refused naming the variable, and nothing it could run runs; messages and
pydantic models are seen as their fields; calls are limited to safe methods."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import os
import pathlib
import pickle
import subprocess
from collections import OrderedDict, namedtuple

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import BaseModel, SecretStr

from threadloom.agent import create_agent
from threadloom.errors import SecurityError
from threadloom.messages import HumanMessage
from threadloom.models import ScriptedChatModel
from threadloom.prompts import ChatPromptTemplate, PromptTemplateError
from threadloom.tools import tool


class _Touch:
    """Unpickling this creates ``path``: the proof that a pickle payload ran."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (self.path,))


def _pickle_payload(marker: pathlib.Path) -> str:
    return pickle.dumps(_Touch(marker), protocol=0).decode("ascii")


PARSE_RAW = ("{{ m.parse_raw(p, content_type='application/pickle', allow_pickle=true) }}")


class Doc(BaseModel):
    title: str
    tags: list[str] = []


class Creds(BaseModel):
    user: str
    key: SecretStr


@tool
def delete_everything(path: str) -> str:
    """Deletes a path."""
    pathlib.Path(path).unlink()
    return "deleted"


def test_the_pickle_attack_is_real_without_plain_data(tmp_path) -> None:
    # The same template in Jinja2's own sandbox runs the payload: what the tests below stop.
    marker = tmp_path / "ran"
    env = ImmutableSandboxedEnvironment()
    with pytest.warns(DeprecationWarning):
        try:
            env.from_string(PARSE_RAW).render(m=HumanMessage("hi"),
                                               p=_pickle_payload(marker))
        except Exception:  # the unpickled result is no message; the payload ran first
            pass
    assert marker.exists()


@pytest.mark.parametrize(("value", "access"), [
    (HumanMessage("hi"), "v"), (Doc(title="t"), "v"), ([Doc(title="t")], "v[0]"),
    ({"inner": HumanMessage("x")}, "v.inner")])
def test_pydantic_parse_raw_pickle_does_not_run(tmp_path, value, access: str) -> None:
    marker = tmp_path / "ran"
    template = PARSE_RAW.replace("m.", access + ".")
    with pytest.raises((SecurityError, PromptTemplateError)):
        ChatPromptTemplate(template).render(v=value, p=_pickle_payload(marker))
    assert not marker.exists()


def test_pickle_through_create_agent_with_a_pydantic_run_input(tmp_path) -> None:
    marker = tmp_path / "ran"
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, system_prompt=PARSE_RAW.replace("m.", "doc."))
    with pytest.raises((SecurityError, PromptTemplateError)):
        agent.run("hi", doc=Doc(title="t"), p=_pickle_payload(marker))
    assert not marker.exists() and model.calls == []


def test_create_agent_sees_a_pydantic_run_input_as_its_fields() -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, system_prompt="Doc {{ doc.title }} {{ doc.tags|join(',') }}")
    agent.run("hi", doc=Doc(title="T", tags=["a", "b"]))
    assert model.calls[0]["messages"][0].text == "Doc T a,b"


@pytest.mark.parametrize(("value", "template"), [
    (os, "{{ x.system('touch {marker}') }}"),
    (os.system, "{{ x('touch {marker}') }}"),
    (subprocess, "{{ x.run(['touch', '{marker}']) }}"),
    (open, "{{ x('{marker}', 'w') }}"),
    (pathlib.Path, "{{ x('{marker}').touch() }}"),
    ("path", "{{ x.write_text('owned') }}"),
    (delete_everything, "{{ x.invoke({'path': '{marker}'}) }}"),
    (os.environ, "{{ x }}"),
    (SecretStr("sk-live-123"), "{{ x.get_secret_value() }}"),
    (Creds(user="u", key=SecretStr("sk-live-123")), "{{ x.key.get_secret_value() }}"),
    (print, "{{ x }}"),
    (type, "{{ x }}"),
])
def test_non_data_variable_is_refused_naming_it(tmp_path, value, template) -> None:
    marker = tmp_path / "marker"
    if value == "path":
        marker.write_text("mine")
        value = marker
    with pytest.raises(SecurityError, match="'x"):
        ChatPromptTemplate(template.replace("{marker}", str(marker))).render(x=value)
    assert not marker.exists() or marker.read_text() == "mine"


def test_refusal_names_the_path_inside_a_value() -> None:
    with pytest.raises(SecurityError, match=r"'cfg\.tools\[1\]'.*function"):
        ChatPromptTemplate("{{ cfg.name }}").render(cfg={"name": "n", "tools": [1, print]})
    with pytest.raises(SecurityError, match=r"'who\.key'.*SecretStr"):
        ChatPromptTemplate("{{ who.user }}").render(who=Creds(user="u", key=SecretStr("k")))


def test_unused_variables_are_not_converted() -> None:
    assert ChatPromptTemplate("{{ a }}").render(a=1, b=os) == "1"


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(SecurityError, match="deeper"):
        ChatPromptTemplate("{{ x|length }}").render(x=deep)


Point = namedtuple("Point", "x y")


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Mode(enum.StrEnum):
    FAST = "fast"


@dataclasses.dataclass
class Card:
    name: str
    when: datetime.date


@pytest.mark.parametrize(("source", "expected"), [
    ("{{ m.content }}|{{ m.text }}|{{ m.type }}", "hi|hi|human"),
    ("{{ d.title }} {{ d['tags']|length }}", "T 2"),
    ("{{ p.x + p.y }}", "3"),
    ("{{ c }}", "Color.RED"),
    ("{{ lv + 1 }} {{ 'yes' if md == 'fast' }} {{ md }}", "4 yes fast"),
    ("{{ card.name }} {{ card.when.strftime('%Y') }} {{ card.when.year }}", "n 2024 2024"),
    ("{{ od['a'] }}{{ flag }}{{ n + 1 }}", "1True3"),
])
def test_benign_values_render_as_plain_data(source: str, expected: str) -> None:
    out = ChatPromptTemplate(source).render(
        m=HumanMessage("hi"), d=Doc(title="T", tags=["a", "b"]), p=Point(1, 2), c=Color.RED,
        card=Card("n", datetime.date(2024, 5, 1)), od=OrderedDict(a=1), flag=True, n=2,
        lv=Level.HIGH, md=Mode.FAST)
    assert out == expected


@pytest.mark.parametrize("source", [
    "{{ 'a'.encode('utf-8') }}",
    "{{ {'a': 1}.copy() }}",
    "{{ dict.fromkeys('ab') }}",
    "{{ namespace.mro() }}",
    "{{ range(3).count(1) }}",
    "{{ loop }}{% for x in [1] %}{{ loop.__class__ }}{% endfor %}",
    "{% for x in [1] %}{{ loop.depth0.bit_length.__self__ }}{% endfor %}",
])
def test_calls_outside_the_safe_methods_are_refused(source: str) -> None:
    with pytest.raises(SecurityError):
        ChatPromptTemplate(source).render()


@pytest.mark.parametrize(("source", "expected"), [
    ("{% for i in tree recursive %}{{ i.n }}({{ loop(i.kids) }}){% endfor %}", "1(2())"),
    ("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}hi{% endcall %}", "[hi]"),
    ("{% for x in seq %}{{ loop.cycle('a', 'b') }}{% if loop.changed(x) %}!{% endif %}"
     "{% endfor %}", "a!ba!"),
    ("{{ '{:%Y-%m}'.format(day) }} {{ day.isoformat() }} {{ '%05.1f'|format(3.14159) }}",
     "2024-05 2024-05-01 003.1"),
    ("{{ users|selectattr('active')|map(attribute='name')|join(', ') }}", "a"),
    ("{{ seq|batch(2)|list }}|{{ seq|sum }}|{{ seq|unique|list }}", "[[1, 1], [2]]|4|[1, 2]"),
])
def test_template_helpers_keep_working(source: str, expected: str) -> None:
    out = ChatPromptTemplate(source).render(
        tree=[{"n": 1, "kids": [{"n": 2, "kids": []}]}], seq=[1, 1, 2],
        day=datetime.date(2024, 5, 1),
        users=[{"name": "a", "active": True}, {"name": "b", "active": False}])
    assert out == expected
