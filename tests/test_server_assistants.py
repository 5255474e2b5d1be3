"""Assistants made, updated (versions), listed, counted and deleted through the
unmodified ``langgraph_sdk`` client (async and sync) against the real server; a run on a
made assistant uses its config and context, a later version's once it is the latest."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError
from server_harness import HERE, running

from threadloom.server import hash_key

pytestmark = pytest.mark.xdist_group("server")

GRAPHS = {"nested": f"{HERE / 'server_graphs.py'}:nested_graph",
          "cfg": f"{HERE / 'server_graphs.py'}:config_graph"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv"), GRAPHS) as base:
        yield base


async def test_create_run_update_versions_latest_delete(url):
    client = get_client(url=url, api_key=None)
    tag = uuid.uuid4().hex
    made = await client.assistants.create(
        "cfg", config={"configurable": {"tone": "warm"}}, metadata={"tag": tag},
        name=f"Warm {tag}", description="a warm one")
    aid = made["assistant_id"]
    assert str(uuid.UUID(aid)) == aid
    assert (made["graph_id"], made["version"], made["name"], made["description"]) == \
        ("cfg", 1, f"Warm {tag}", "a warm one")
    assert made["config"] == {"configurable": {"tone": "warm"}}
    assert made["metadata"] == {"tag": tag}
    assert (await client.assistants.get(aid)) == made
    out = await client.runs.wait(None, aid, input={"text": "hi"})
    assert out == {"text": "hi+warm"}

    new = await client.assistants.update(aid, config={"configurable": {"tone": "cool"}},
                                         metadata={"more": 1})
    assert new["version"] == 2 and new["metadata"] == {"tag": tag, "more": 1}
    assert new["name"] == f"Warm {tag}" and new["created_at"] == made["created_at"]
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], aid, input={"text": "hi"})
    assert out == {"text": "hi+cool"}
    assert (await client.threads.get(thread["thread_id"]))["metadata"]["assistant_id"] == aid

    versions = await client.assistants.get_versions(aid)
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[1]["config"] == {"configurable": {"tone": "warm"}}
    assert [v["version"] for v in await client.assistants.get_versions(
        aid, metadata={"more": 1})] == [2]
    back = await client.assistants.set_latest(aid, 1)
    assert back["version"] == 1 and back["config"] == {"configurable": {"tone": "warm"}}
    assert (await client.assistants.get(aid))["version"] == 1
    assert await client.runs.wait(None, aid, input={"text": "x"}) == {"text": "x+warm"}
    third = await client.assistants.update(aid, name="renamed")
    assert third["version"] == 3 and third["config"] == back["config"]
    with pytest.raises(NotFoundError):
        await client.assistants.set_latest(aid, 9)

    assert await client.assistants.count(metadata={"tag": tag}) == 1
    await client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        await client.assistants.get(aid)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await client.runs.wait(None, aid, input={"text": "x"})
    assert raised.value.response.status_code == 404
    assert await client.assistants.count(metadata={"tag": tag}) == 0


async def test_context_if_exists_search_and_bad_input(url):
    client = get_client(url=url, api_key=None)
    tag = uuid.uuid4().hex
    aid = str(uuid.uuid4())
    made = await client.assistants.create("nested", context={"who": "zoe"},
                                          assistant_id=aid, metadata={"tag": tag})
    assert made["assistant_id"] == aid and made["name"] == "Untitled"
    assert made["context"] == {"who": "zoe"}
    out = await client.runs.wait(None, aid, input={"text": "a"})
    assert out == {"text": "a+outer(zoe)+inner"}
    out = await client.runs.wait(None, aid, input={"text": "a"}, context={"who": "max"})
    assert out == {"text": "a+outer(max)+inner"}  # the run's context over the assistant's
    same = await client.assistants.create("nested", assistant_id=aid, if_exists="do_nothing",
                                          context={"who": "other"})
    assert same == made
    with pytest.raises(ConflictError):
        await client.assistants.create("nested", assistant_id=aid)
    with pytest.raises(NotFoundError):
        await client.assistants.create("no-such-graph")
    second = await client.assistants.create("cfg", name=f"Second {tag}",
                                            metadata={"tag": tag})
    found = await client.assistants.search(metadata={"tag": tag})
    assert [a["assistant_id"] for a in found] == [second["assistant_id"], aid]  # newest first
    assert [a["assistant_id"] for a in await client.assistants.search(
        name=f"second {tag}".upper())] == [second["assistant_id"]]
    assert [a["assistant_id"] for a in await client.assistants.search(
        metadata={"tag": tag}, graph_id="nested")] == [aid]
    page = await client.assistants.search(metadata={"tag": tag}, limit=1,
                                          response_format="object")
    assert len(page["assistants"]) == 1 and page["next"] == "1"
    picked = await client.assistants.search(metadata={"tag": tag}, select=["assistant_id"])
    assert picked == [{"assistant_id": second["assistant_id"]}, {"assistant_id": aid}]
    system = await client.assistants.search(metadata={"created_by": "system"})
    assert sorted(a["graph_id"] for a in system) == ["cfg", "nested"]
    assert await client.assistants.count(graph_id="nested") >= 2


def test_sync_client_and_delete_threads(url):
    client = get_sync_client(url=url, api_key=None)
    made = client.assistants.create("cfg", config={"configurable": {"tone": "dry"}})
    aid = made["assistant_id"]
    thread = client.threads.create()
    assert client.runs.wait(thread["thread_id"], aid, input={"text": "s"}) == \
        {"text": "s+dry"}
    updated = client.assistants.update(aid, graph_id="nested", context={"who": "sam"})
    assert updated["graph_id"] == "nested" and updated["version"] == 2
    assert client.runs.wait(None, aid, input={"text": "s"}) == {"text": "s+outer(sam)+inner"}
    assert [v["version"] for v in client.assistants.get_versions(aid)] == [2, 1]
    keep = client.threads.create()
    client.assistants.delete(aid, delete_threads=True)
    with pytest.raises(NotFoundError):
        client.threads.get(thread["thread_id"])
    assert client.threads.get(keep["thread_id"])["thread_id"] == keep["thread_id"]
    with pytest.raises(NotFoundError):
        client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        client.assistants.update(str(uuid.uuid4()), name="x")


def test_assistants_survive_a_restart(tmp_path):
    with running(tmp_path, GRAPHS) as base:
        client = get_sync_client(url=base, api_key=None)
        aid = client.assistants.create("cfg", config={"configurable": {"tone": "kept"}}
                                       )["assistant_id"]
        client.assistants.update(aid, name="kept one")
    with running(tmp_path, GRAPHS) as base:
        client = get_sync_client(url=base, api_key=None)
        got = client.assistants.get(aid)
        assert got["version"] == 2 and got["name"] == "kept one"
        assert client.runs.wait(None, aid, input={"text": "r"}) == {"text": "r+kept"}
        # without keys, a graph's own assistant may change too; runs by graph name follow
        system = client.assistants.search(graph_id="cfg", metadata={"created_by": "system"})
        client.assistants.update(system[0]["assistant_id"],
                                 config={"configurable": {"tone": "loud"}})
        assert client.runs.wait(None, "cfg", input={"text": "n"}) == {"text": "n+loud"}


def test_owners_and_scopes(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [
        {"sha256": hash_key("alice-key"), "principal": "alice"},
        {"sha256": hash_key("bob-key"), "principal": "bob"},
        {"sha256": hash_key("reader-key"), "principal": "alice",
         "scopes": ["assistants:read", "runs:write", "runs:read"]}]}))
    with running(tmp_path, GRAPHS, keys_file=str(keys)) as base:
        alice = get_sync_client(url=base, api_key="alice-key")
        bob = get_sync_client(url=base, api_key="bob-key")
        reader = get_sync_client(url=base, api_key="reader-key")
        mine = alice.assistants.create("cfg", config={"configurable": {"tone": "hers"}})
        aid = mine["assistant_id"]
        with pytest.raises(NotFoundError):
            bob.assistants.get(aid)  # another owner's assistant is not there for bob
        with pytest.raises(NotFoundError):
            bob.assistants.update(aid, name="taken")
        assert bob.assistants.search(metadata={"created_by": "system"})  # shared, seen
        assert [a["assistant_id"] for a in reader.assistants.search(graph_id="cfg")
                if a["assistant_id"] == aid] == [aid]
        assert reader.runs.wait(None, aid, input={"text": "r"}) == {"text": "r+hers"}
        assert [v["version"] for v in reader.assistants.get_versions(aid)] == [1]
        with pytest.raises(httpx.HTTPStatusError) as denied:
            reader.assistants.create("cfg")
        assert denied.value.response.status_code == 403
        assert "assistants:write" in denied.value.response.json()["detail"]
        system = bob.assistants.search(graph_id="cfg", metadata={"created_by": "system"})[0]
        with pytest.raises(httpx.HTTPStatusError) as shared:
            bob.assistants.update(system["assistant_id"], config={"configurable": {"x": 1}})
        assert shared.value.response.status_code == 403
        with pytest.raises(httpx.HTTPStatusError):
            bob.assistants.delete(system["assistant_id"])
        assert alice.assistants.update(aid, name="still hers")["version"] == 2


async def test_a_graph_name_names_its_assistant_and_schemas_have_properties(url):
    # as langgraph dev: assistants.get/get_graph/get_schemas take a served graph's name
    client = get_client(url=url, api_key=None)
    by_name = await client.assistants.get("nested")
    assert str(uuid.UUID(by_name["assistant_id"])) == by_name["assistant_id"]
    assert by_name["graph_id"] == "nested"
    assert (await client.assistants.get_graph("nested"))["nodes"]
    schemas = await client.assistants.get_schemas("nested")
    assert schemas["state_schema"]["properties"]  # a TypedDict state, fields described
    assert schemas == await client.assistants.get_schemas(by_name["assistant_id"])
    with pytest.raises(NotFoundError):
        await client.assistants.get(str(uuid.uuid4()))
