"""A value the template cannot compute gives a PromptTemplateError naming the line.

Before, ``{{ n|filesizeformat }}`` with a huge integer raised a bare ``OverflowError`` and
``{{ 1/0 }}`` a bare ``ZeroDivisionError`` out of the render, with nothing saying which
template or line failed.
"""

from __future__ import annotations

import pytest

from threadloom.prompts import ChatPromptTemplate, PromptTemplateError


def _user(body: str) -> ChatPromptTemplate:
    return ChatPromptTemplate('{% message role="user" %}\n' + body + "\n{% endmessage %}")


@pytest.mark.parametrize(("body", "kind"), [
    ("{{ n|filesizeformat }}", "OverflowError"),
    ("{{ n * 1.0 }}", "OverflowError"),
    ("{{ n|float }}", "OverflowError"),
    ("{{ 1 / zero }}", "ZeroDivisionError"),
    ('{{ "%d"|format(word) }}', "TypeError"),
])
def test_a_failing_expression_is_a_prompt_error_naming_line_and_cause(body: str,
                                                                       kind: str) -> None:
    template = _user(body)
    with pytest.raises(PromptTemplateError) as caught:
        template.render_messages(n=10**400, zero=0, word="x")
    text = str(caught.value)
    assert kind in text
    assert "line 2" in text
    assert type(caught.value.__cause__).__name__ == kind


def test_the_same_template_still_renders_good_values() -> None:
    template = _user("{{ n|filesizeformat }} / {{ 6 / two }}")
    [message] = template.render_messages(n=2048, two=2)
    assert message.content == "2.0 kB / 3.0"


def test_a_template_loaded_from_a_file_names_its_line_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from threadloom.prompts import FileTemplateLoader

    (tmp_path / "t.jinja").write_text(
        '{% message role="user" %}\nfine\n{{ 1 / zero }}\n{% endmessage %}')
    template = FileTemplateLoader(tmp_path).template("t.jinja")
    with pytest.raises(PromptTemplateError, match="line 3: ZeroDivisionError"):
        template.render_messages(zero=0)
