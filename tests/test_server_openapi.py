"""``/openapi.json`` describes every route the app answers, and fuzzing the server from
it (schemathesis, bounded) never gets a 500."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from server_harness import HERE, running

from threadloom.server import (
    routes_assistants,
    routes_meta,
    routes_openai,
    routes_runs,
    routes_threads,
)
from threadloom.server.openapi import TABLE

pytestmark = pytest.mark.xdist_group("server")
FAST = {"echo": f"{HERE / 'server_graphs.py'}:echo_graph",
        "human": f"{HERE / 'server_graphs.py'}:human_graph"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("fuzz"), FAST) as base:
        yield base


@pytest.fixture(scope="module")
def api_schema(url):
    return schemathesis.openapi.from_url(url + "/openapi.json")


def test_every_route_is_described():
    routes = [*routes_meta.ROUTES, *routes_assistants.ROUTES, *routes_threads.ROUTES,
              *routes_runs.ROUTES, *routes_openai.ROUTES]
    served = {(m.lower(), r.path) for r in routes for m in r.methods if m != "HEAD"}
    described = {(m, p) for m, p, *_ in TABLE}
    assert served == described


def test_spec_is_openapi_31(url):
    spec = httpx.get(url + "/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert spec["components"]["schemas"]["RunCreate"]["properties"]["multitask_strategy"]


def test_fuzz_never_a_server_error(api_schema, url):
    failures = []
    operations = [r.ok() for r in api_schema.get_all_operations()]
    assert len(operations) >= len(TABLE) - 1  # schemathesis leaves out /openapi.json
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=6, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            response = case.call(base_url=url, timeout=15)
            if response.status_code >= 500:
                failures.append((case.method, case.formatted_path, response.status_code,
                                 response.text[:200]))

        check()
    assert failures == []


def _nested(depth):
    return "[" * depth + "]" * depth


def _detail(r):
    body = r.json()
    return body["error"]["message"] if "error" in body else body["detail"]  # /v1: OpenAI's


BODY_ROUTES = ["/threads", "/threads/search", "/runs/wait", "/assistants/search",
               "/v1/chat/completions"]


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("depth", [300, 470, 5000])
def test_deeply_nested_body_is_422_not_500(url, path, depth):
    body = '{"assistant_id": "echo", "metadata": {"x": ' + _nested(depth) + "}}"
    r = httpx.post(url + path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "nested" in _detail(r)


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize("text", [r'"\ud800"', r'"a\udfffb"', r'"x\ud83d"'])
def test_lone_surrogate_is_422_not_500(url, path, text):
    body = '{"assistant_id": "echo", "metadata": {' + text + ": " + text + "}}"
    r = httpx.post(url + path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "surrogate" in _detail(r)


def test_paired_surrogates_and_moderate_nesting_pass(url):
    tid = httpx.post(url + "/threads", content='{"metadata": {"e": "\\ud83d\\ude00"}}').json()
    assert tid["metadata"] == {"e": "\N{GRINNING FACE}"}
    deep = httpx.post(url + "/runs/wait", content='{"assistant_id": "human", "input": '
                      '{"text": "x", "answer": ' + _nested(200) + "}}")
    assert deep.status_code == 200, deep.text
