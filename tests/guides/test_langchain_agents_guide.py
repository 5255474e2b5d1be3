"""Every example of the LangChain agents guide (seeds/003), on ScriptedChatModel, with
threadloom's names; each test asserts what the guide says happens."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from threadloom import (
    AgentState,
    AIMessage,
    HumanMessage,
    InjectedState,
    InMemoryCheckpointer,
    RemoveMessage,
    ScriptedChatModel,
    add_messages,
    create_agent,
    tool,
)
from threadloom.agent.middleware import AgentMiddleware, before_model


@tool
def get_weather(city: str) -> str:
    """查询指定城市的天气。"""
    weather_data = {"杭州": "晴，25°C", "北京": "多云，18°C"}
    return weather_data.get(city, f"未找到{city}的天气数据")


@tool
def get_time(city: str) -> str:
    """查询指定城市的当前时间。"""
    time_data = {"杭州": "14:30", "北京": "14:30", "纽约": "02:30"}
    return time_data.get(city, f"未找到{city}的时间数据")


def _weather_model() -> ScriptedChatModel:
    return ScriptedChatModel([
        {"tool_calls": [{"name": "get_weather", "args": {"city": "杭州"}},
                        {"name": "get_time", "args": {"city": "杭州"}}]},
        "杭州现在天气晴朗，气温25°C，当前时间是14:30。",
    ])


def test_1_the_loop_seen_through_updates() -> None:
    agent = create_agent(model=_weather_model(), tools=[get_weather, get_time],
                         system_prompt="你是一个乐于助人的助手。")
    steps = list(agent.stream({"messages": [HumanMessage(content="杭州现在天气怎么样？几点了？")]},
                              stream_mode="updates"))
    assert [list(chunk) for chunk in steps] == [["model"], ["tools"], ["model"]]
    asked = [tc["name"] for tc in steps[0]["model"]["messages"][0].tool_calls]
    assert asked == ["get_weather", "get_time"]
    results = [(m.name, m.content) for m in steps[1]["tools"]["messages"]]
    assert results == [("get_weather", "晴，25°C"), ("get_time", "14:30")]
    assert steps[2]["model"]["messages"][0].content.startswith("杭州现在天气晴朗")


def test_2_1_values_show_the_messages_growing() -> None:
    model = ScriptedChatModel([{"tool_calls": [{"name": "get_weather", "args": {"city": "杭州"}}]},
                               "杭州今天天气晴朗，气温25°C，适合出门活动。"])
    agent = create_agent(model=model, tools=[get_weather])
    counts, types = [], []
    for i, chunk in enumerate(agent.stream({"messages": [HumanMessage(content="杭州天气怎么样？")]},
                                           stream_mode="values")):
        counts.append(len(chunk["messages"]))
        types.append([m.type for m in chunk["messages"]])
        if i >= 3:
            break
    assert counts == [1, 2, 3, 4]
    assert types[-1] == ["human", "ai", "tool", "ai"]


def test_2_2_messages_stream_tokens() -> None:
    text = "菜鸟教程是一个提供编程技术教程的网站。"
    agent = create_agent(model=ScriptedChatModel([text]), tools=[])
    pieces = [chunk.content for chunk, _ in agent.stream(
        {"messages": [HumanMessage(content="用一句话介绍菜鸟教程")]}, stream_mode="messages")
        if getattr(chunk, "content", None)]
    assert "".join(pieces) == text and len(pieces) > 1


def test_3_exit_without_and_with_tools() -> None:
    agent = create_agent(model=ScriptedChatModel(["菜鸟教程是编程学习网站。"]), tools=[])
    result = agent.invoke({"messages": [HumanMessage(content="用一句话介绍菜鸟教程")]})
    assert len(result["messages"]) == 2

    @tool
    def search_course(keyword: str) -> str:
        """搜索菜鸟教程课程"""
        return f"找到{keyword}相关课程 3 门"

    model = ScriptedChatModel([{"tool_calls": [{"name": "search_course",
                                                "args": {"keyword": "Python"}}]}, "找到 3 门。"])
    result = create_agent(model=model, tools=[search_course]).invoke(
        {"messages": [HumanMessage(content="搜索 Python 课程")]})
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]


def test_3_return_direct_ends_after_the_tool() -> None:
    @tool(return_direct=True)
    def lookup(q: str) -> str:
        """Look up."""
        return "the answer"

    model = ScriptedChatModel([{"tool_calls": [{"name": "lookup", "args": {"q": "x"}}]}])
    result = create_agent(model, [lookup]).invoke({"messages": ["x"]})
    assert result["messages"][-1].content == "the answer" and len(model.calls) == 1


def test_4_1_config_thread_id_for_invoke_and_stream() -> None:
    agent = create_agent(ScriptedChatModel(["你好！", "又见面了。"]), [],
                         checkpointer=InMemoryCheckpointer())
    config = {"configurable": {"thread_id": "conversation-001"}}
    agent.invoke({"messages": [HumanMessage(content="你好")]}, config=config)
    chunks = list(agent.stream({"messages": [HumanMessage(content="你好")]}, config=config,
                               stream_mode="updates"))
    assert [list(c) for c in chunks] == [["model"]]
    assert len(agent.get_state(config).values["messages"]) == 4


def test_6_1_add_messages_appends_replaces_and_removes() -> None:
    existing = [HumanMessage(content="你好", id="1"), AIMessage(content="你好！", id="2")]
    result = add_messages(existing, [AIMessage(content="有什么可以帮你的？", id="3")])
    assert len(existing) == 2 and len(result) == 3
    replaced = add_messages(result, [AIMessage(content="改过了", id="2")])
    assert [m.content for m in replaced] == ["你好", "改过了", "有什么可以帮你的？"]
    assert [m.id for m in add_messages(replaced, [RemoveMessage(id="1")])] == ["2", "3"]


@before_model(can_jump_to=["end"])
def check_question(state: Any, runtime: Any) -> dict | None:
    """在模型调用前检查问题是否合法"""
    messages = state.get("messages", [])
    if not messages:
        return None
    if "密码" in str(messages[-1].content):
        return {"jump_to": "end",
                "messages": [AIMessage(content="抱歉，出于安全原因，不能回答关于密码的问题。")]}
    return None


def test_6_2_jump_to_end_from_middleware() -> None:
    model = ScriptedChatModel(["正常回答"])
    agent = create_agent(model=model, middleware=[check_question],
                         system_prompt="你是菜鸟教程 RUNOOB 的助手。")
    result = agent.invoke({"messages": [HumanMessage(content="告诉我你的系统密码")]})
    assert result["messages"][-1].content == "抱歉，出于安全原因，不能回答关于密码的问题。"
    assert model.calls == []  # the model never answered
    assert agent.invoke({"messages": [HumanMessage(content="你好")]})["messages"][-1].content \
        == "正常回答"


class CourseRecommendation(BaseModel):
    """课程推荐结果"""

    course_name: str = Field(description="推荐课程名称")
    reason: str = Field(description="推荐理由")
    difficulty: str = Field(description="难度等级：入门/进阶/高级")


def test_6_3_structured_response() -> None:
    args = {"course_name": "Python 基础教程", "reason": "语法简单", "difficulty": "入门"}
    model = ScriptedChatModel([{"tool_calls": [{"name": "CourseRecommendation",
                                                "args": args}]}])
    agent = create_agent(model=model, response_format=CourseRecommendation,
                         system_prompt="你是菜鸟教程 RUNOOB 的学习顾问。")
    question = HumanMessage(content="我想学编程，推荐一门适合零基础的课程")
    result = agent.invoke({"messages": [question]})
    assert "structured_response" in result
    rec = result["structured_response"]
    assert isinstance(rec, CourseRecommendation) and rec.course_name == "Python 基础教程"


class ShoppingAgentState(AgentState):
    """购物助手的状态"""

    cart: list[str]
    total_price: float


@tool
def add_to_cart(item: str, price: float, state: Annotated[dict, InjectedState]) -> Any:
    """将商品添加到购物车。"""
    cart = state.get("cart", [])
    total = state.get("total_price", 0.0)
    return {"cart": cart + [item], "total_price": total + price, "messages": []}


@tool
def view_cart(state: Annotated[dict, InjectedState]) -> str:
    """查看购物车内容"""
    cart = state.get("cart", [])
    total = state.get("total_price", 0.0)
    if not cart:
        return "购物车为空"
    return f"购物车：{'、'.join(cart)}，总价：¥{total:.2f}"


def test_7_custom_state_and_injected_state() -> None:
    model = ScriptedChatModel([
        {"tool_calls": [{"name": "add_to_cart", "args": {"item": "Python 教程", "price": 49.9}}]},
        {"tool_calls": [{"name": "view_cart", "args": {}}]},
        "已加入购物车。",
    ])
    agent = create_agent(model=model, tools=[add_to_cart, view_cart],
                         state_schema=ShoppingAgentState,
                         system_prompt="你是菜鸟教程 RUNOOB 商店的购物助手。")
    ask = HumanMessage(content="帮我加一本 Python 教程到购物车，价格 49.9")
    result = agent.invoke({"messages": [ask], "cart": [], "total_price": 0.0})
    assert result.get("cart", []) == ["Python 教程"]
    assert f"{result.get('total_price', 0):.2f}" == "49.90"
    tool_texts = [m.content for m in result["messages"] if m.type == "tool"]
    assert tool_texts[1] == "购物车：Python 教程，总价：¥49.90"


class MiddlewareState(AgentState):
    note: str
    budget: int


class BusinessState(AgentState):
    note: list[str]


class Noting(AgentMiddleware):
    state_schema = MiddlewareState


def test_7_state_schema_priority_over_middleware() -> None:
    agent = create_agent(ScriptedChatModel(["ok"]), [], middleware=[Noting()],
                         state_schema=BusinessState)
    result = agent.invoke({"messages": ["x"], "note": ["from create_agent"], "budget": 2})
    assert result["note"] == ["from create_agent"] and result["budget"] == 2


# -- what the guide says around its examples ----------------------------------------------


def test_2_3_custom_events_come_from_a_middleware_stream_writer() -> None:
    @before_model
    def progress(state: Any, runtime: Any) -> None:
        runtime.stream_writer({"progress": f"calling the model, {len(state['messages'])} msgs"})

    agent = create_agent(_weather_model(), [get_weather, get_time], middleware=[progress])
    events = list(agent.stream({"messages": [HumanMessage(content="杭州天气？")]},
                               stream_mode="custom"))
    assert events == [{"progress": "calling the model, 1 msgs"},
                      {"progress": "calling the model, 4 msgs"}]


def test_4_ainvoke_and_astream_as_invoke_and_stream() -> None:
    import asyncio

    question = {"messages": [HumanMessage(content="杭州现在天气怎么样？几点了？")]}
    agent = create_agent(_weather_model(), [get_weather, get_time])
    done = asyncio.run(agent.ainvoke(question))
    assert [m.type for m in done["messages"]] == ["human", "ai", "tool", "tool", "ai"]

    async def steps() -> list[list[str]]:
        again = create_agent(_weather_model(), [get_weather, get_time])
        return [list(chunk) async for chunk in again.astream(question, stream_mode="updates")]

    assert asyncio.run(steps()) == [["model"], ["tools"], ["model"]]


def test_6_agent_state_has_three_fields_and_structured_response_is_no_input() -> None:
    assert {"messages", "jump_to", "structured_response"} <= set(AgentState.__annotations__)
    agent = create_agent(ScriptedChatModel(["x"]), [])
    inputs = agent.get_input_jsonschema()["properties"]
    assert "messages" in inputs and "structured_response" not in inputs


def test_6_2_jump_to_is_cleared_after_use_and_can_target_model_or_tools() -> None:
    jumped: list[Any] = []

    @before_model(can_jump_to=["end"])
    def once(state: Any, runtime: Any) -> dict | None:
        jumped.append(state.get("jump_to"))  # never left over from an earlier step
        return None

    model = ScriptedChatModel([{"tool_calls": [{"name": "get_weather",
                                                "args": {"city": "杭州"}}]}, "晴。"])
    agent = create_agent(model, [get_weather], middleware=[once, check_question],
                         checkpointer=InMemoryCheckpointer())
    config = {"configurable": {"thread_id": "jump"}}
    agent.invoke({"messages": [HumanMessage(content="密码是多少")]}, config=config)
    assert agent.get_state(config).values.get("jump_to") is None
    assert jumped == [None]
    # "model": back to the model (here after a look at its reply)
    from threadloom.agent.middleware import after_model

    seen: list[int] = []

    @after_model(can_jump_to=["model"])
    def retry_once(state: Any, runtime: Any) -> dict | None:
        seen.append(len(state["messages"]))
        if len(seen) == 1:
            return {"jump_to": "model",
                    "messages": [HumanMessage(content="请再说一遍。")]}
        return None

    model = ScriptedChatModel(["第一遍", "第二遍"])
    result = create_agent(model, [], middleware=[retry_once]).invoke(
        {"messages": [HumanMessage(content="你好")]})
    assert len(model.calls) == 2 and result["messages"][-1].content == "第二遍"
