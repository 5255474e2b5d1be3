"""System and user prompt templates: variables as run inputs, required variables (H28),
collisions, the sandbox."""

from __future__ import annotations

import pytest

from threadloom.agent import create_agent
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.errors import SecurityError
from threadloom.models import ScriptedChatModel
from threadloom.prompts.sandbox import MissingVariablesError

H28 = ('{% if prior is not none %}{% set offset = prior|length %}{% else %}'
       '{% set offset = 0 %}{% endif %}'
       '{% for d in docs %}[{{ loop.index + offset }}] {{ d }}\n{% endfor %}Q: {{ question }}')


def test_variables_are_run_inputs_via_run_and_invoke() -> None:
    model = ScriptedChatModel(["a", "b"])
    agent = create_agent(model, system_prompt="You help in {{ city }}.",
                         user_prompt="Weather in {{ city }}?")
    agent.run(messages=[("user", "hello")], city="Oslo")
    agent.invoke({"messages": [("user", "hello")], "city": "Rome"})
    first, second = (c["messages"] for c in model.calls)
    assert [(m.type, m.text) for m in first] == [
        ("system", "You help in Oslo."), ("human", "hello"), ("human", "Weather in Oslo?")]
    assert second[0].text == "You help in Rome." and second[-1].text == "Weather in Rome?"


def test_rendered_user_prompt_is_stored_but_system_prompt_is_not(thread_id: str) -> None:
    agent = create_agent(ScriptedChatModel(["a"]), system_prompt="Sys {{ tone }}",
                         user_prompt="{{ q }}", checkpointer=InMemoryCheckpointer())
    out = agent.run(q="why?", tone="calm", thread_id=thread_id)
    assert [(m.type, m.text) for m in out["messages"]] == [("human", "why?"), ("ai", "a")]
    assert "q" not in out and "tone" not in out


def test_message_blocks_in_user_prompt() -> None:
    model = ScriptedChatModel(["ok"])
    template = ('{% message role="user" %}Context: {{ ctx }}{% endmessage %}'
                '{% message role="user" %}Question: {{ q }}{% endmessage %}')
    create_agent(model, user_prompt=template).run(ctx="c", q="q")
    assert [m.text for m in model.calls[0]["messages"]] == ["Context: c", "Question: q"]


def test_h28_required_all_with_set_variables() -> None:
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, user_prompt=H28, required_variables="*")
    agent.run(prior=None, docs=["a", "b"], question="why?")
    assert model.calls[0]["messages"][-1].text == "[1] a\n[2] b\nQ: why?"
    with pytest.raises(MissingVariablesError) as info:
        agent.run(prior=None, docs=["a"])
    assert info.value.missing == ("question",)
    assert len(model.calls) == 1  # raised before any model call


def test_h28_required_list_and_optional() -> None:
    model = ScriptedChatModel(["ok", "ok"])
    agent = create_agent(model, user_prompt=H28, required_variables=["docs"])
    agent.run(docs=["a"])
    assert model.calls[0]["messages"][-1].text == "[1] a\nQ:"
    with pytest.raises(MissingVariablesError, match="docs"):
        agent.run(question="q")
    create_agent(model, user_prompt=H28, required_variables=None).run(question="q")
    assert model.calls[1]["messages"][-1].text == "Q: q"


def test_required_variables_span_both_templates() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), system_prompt="In {{ lang }}.",
                         user_prompt="{{ q }}", required_variables=["lang"])
    with pytest.raises(MissingVariablesError, match="lang"):
        agent.run(q="hi")
    with pytest.raises(ValueError, match="nothere"):
        create_agent(ScriptedChatModel(["x"]), user_prompt="{{ q }}",
                     required_variables=["nothere"])


@pytest.mark.parametrize("template", [
    "{{ messages }}", "{{ step_count }}", "{{ thread_id }}", "{{ hook_context }}",
    "{{ streaming_callback }}", "{{ tools }}",
])
def test_variable_colliding_with_state_key_or_run_argument(template: str) -> None:
    # Haystack's wording: which variable, which prompt, and with what it collides
    name = template.strip("{} ")
    with pytest.raises(ValueError, match=f"Variable '{name}' from user_prompt (is already "
                       "defined in the state schema|conflicts with input names in the run)"):
        create_agent(ScriptedChatModel(["x"]), user_prompt=template)


def test_required_variables_without_any_prompt_variable_warn(
        caplog: pytest.LogCaptureFixture) -> None:
    # as Haystack: a warning, not an error, when no prompt has variables at all
    with caplog.at_level("WARNING"):
        agent = create_agent(ScriptedChatModel(["x"]), required_variables=["name"])
    assert "required_variables is provided but neither" in caplog.text
    assert agent.run("hi")["last_message"].text == "x"


def test_prompt_block_roles_and_syntax_errors_as_haystack() -> None:
    import jinja2

    with pytest.raises(jinja2.TemplateSyntaxError):
        create_agent(ScriptedChatModel(["x"]),
                     system_prompt="{% message role='system' %}Incomplete.")
    with pytest.raises(ValueError, match="system_prompt message block must have role 'system'"):
        create_agent(ScriptedChatModel(["x"]),
                     system_prompt='{% message role="user" %}u{% endmessage %}')
    with pytest.raises(ValueError, match="user_prompt message block must have role 'user'"):
        create_agent(ScriptedChatModel(["x"]),
                     user_prompt='{% message role="system" %}s{% endmessage %}')
    agent = create_agent(ScriptedChatModel(["x"]),
                         user_prompt="{% message role=role_name %}Q: {{ q }}{% endmessage %}")
    with pytest.raises(ValueError, match="user_prompt must render to a user message"):
        agent.run(messages=[], role_name="assistant", q="snow?")
    assert agent.run(messages=[], role_name="user", q="snow?")["messages"][0].text == "Q: snow?"


def test_variable_colliding_with_user_state_key() -> None:
    with pytest.raises(ValueError, match="city"):
        create_agent(ScriptedChatModel(["x"]), system_prompt="{{ city }}",
                     state_schema={"city": {"type": str}})


def test_template_reaching_python_internals_is_refused() -> None:
    with pytest.raises(SecurityError):
        create_agent(ScriptedChatModel(["x"]), system_prompt="{{ ''.__class__.__mro__ }}")


def test_persisted_variables_are_reused_on_the_next_turn(thread_id: str) -> None:
    model = ScriptedChatModel(["a", "b"])
    agent = create_agent(model, system_prompt="Speak {{ lang }}.", required_variables="*",
                         checkpointer=InMemoryCheckpointer())
    agent.run("hi", lang="Norwegian", thread_id=thread_id)
    agent.run("again", thread_id=thread_id)
    assert model.calls[1]["messages"][0].text == "Speak Norwegian."
