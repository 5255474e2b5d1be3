"""The render budget bounds CPU inside filters and memory (issue 17): each template of the
attack run stops with ``RenderBudgetError`` within about a second, in a child process
whose address space is capped at 100 MB above what it had before rendering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from threadloom.prompts import ChatPromptTemplate, FileTemplateLoader, PromptTemplateError

BIG = "{% set s = 'x' * 1000000 %}"
ATTACKS = [
    BIG + "{{ ([s] * 20000)|map('upper')|map('length')|sum }}",
    BIG + "{{ ([s] * 20000)|map('upper')|list|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|join }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|tojson }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|sort|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|select|sort|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|unique|list|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|string|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|pprint|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ (l ~ '')|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ ('%s' % (l,))|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ '{}'.format(l)|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ ','.join(l)|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|map('lower')|join|length }}",
    BIG + "{% set l = [s] * 1000 %}{{ l|upper|length }}",
    BIG + "{{ range(100000)|join(s)|length }}",
    BIG + "{% set ns = namespace(v=[s] * 1000) %}{{ ns }}",
    "{{ '%*s' % (999999999, 'x') }}",
    "{{ '{0:{1}}'.format('x', '999999999') }}",
    "{{ '{:{}}'.format('x', 999999999) }}",
    "{{ '%*s'|format(999999999, 'x') }}",
    "{{ ('a\\t' * 100000).expandtabs(100000)|length }}",
    "{{ ('\\n' * 100000)|indent(100000)|length }}",
    "{{ [1, 2]|slice(1000000)|list|length }}",
    "{% set l = [[1] * 1000] * 1000 %}{{ l|sum(start=[])|length }}",
    "{{ range(1000)|list|tojson(indent=100000)|length }}",
    "{% for i in range(99999) %}{% set t = 'y' * 999999 %}{{ t|length }}{% endfor %}",
    BIG + "{{ dict(a=[s] * 1000).items() }}",
    BIG + "{% for i in range(90000) %}{% message role='user' %}{{ s }}{% endmessage %}"
    "{% endfor %}",
    BIG + "{% set ns = namespace(l=[]) %}{% for i in range(90000) %}{% set b %}{{ s }}"
    "{% endset %}{% set ns.l = ns.l + [b] %}{% endfor %}",
    "{% set s = '\u4e2d' * 1000000 %}{% set a = s|list %}{% set b = s|list %}"
    "{% set c = s|list %}{{ a|length }}",
    "{% set s = 'ab ' * 333333 %}{% set a = s.split() %}{% set b = s.split() %}"
    "{% set c = s.split() %}{{ a|length }}",
]

_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from threadloom.prompts import ChatPromptTemplate
    templates = json.loads(sys.stdin.read())
    ChatPromptTemplate("{{ x|upper }}").render(x="warm up")
    with open("/proc/self/status") as status:
        vm = next(int(l.split()[1]) for l in status if l.startswith("VmSize:")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + 100 * 2**20, vm + 100 * 2**20))
    results = []
    for source in templates:
        started = time.thread_time()
        try:
            ChatPromptTemplate(source).render()
            outcome = "rendered"
        except MemoryError:
            outcome = "MemoryError"
        except Exception as exc:
            outcome = type(exc).__name__
        results.append([outcome, time.thread_time() - started])
    print(json.dumps(results))
""")


def test_attack_templates_stop_fast_and_small() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(ATTACKS),
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    bad = [(source, outcome, round(cpu, 2)) for source, (outcome, cpu)
           in zip(ATTACKS, results, strict=True)
           if outcome != "RenderBudgetError" or cpu > 1.5]
    assert bad == []


def test_benign_large_render_is_within_budget() -> None:
    docs = [{"title": f"d{i}", "body": "word " * 200} for i in range(500)]
    out = ChatPromptTemplate(
        "{% for d in docs|sort(attribute='title') %}{{ loop.index }}. {{ d.title|upper }}: "
        "{{ d.body|truncate(50) }}\n{% endfor %}{{ docs|map(attribute='title')|join(',') }}"
    ).render(docs=docs)
    assert out.startswith("1. D0: word") and out.endswith("d499")


def test_loader_checks_the_size_before_reading(tmp_path) -> None:
    huge = tmp_path / "huge.j2"
    with huge.open("wb") as file:
        file.truncate(8 * 2**30)  # sparse: 8 GiB that reading whole would allocate
    started = time.monotonic()
    with pytest.raises(PromptTemplateError, match="limit"):
        FileTemplateLoader(tmp_path, max_bytes=1000).load("huge.j2")
    assert time.monotonic() - started < 1.0
    (tmp_path / "ok.j2").write_text("x" * 1000)
    assert len(FileTemplateLoader(tmp_path, max_bytes=1000).load("ok.j2")) == 1000
