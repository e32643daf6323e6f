"""The door's second chance as frameworks meet it: the model first calls a
tool nobody declared and, told what was wrong, the call meant. Each
framework runs `get_weather(city)` against the model at `base_url`, whole
and streamed: the `openai` SDK (Chat Completions), the OpenAI Agents SDK
with its default strict tools (over Chat Completions, run and
run_streamed, and over the Responses API, its default model) and
LangGraph's `create_react_agent` with LangChain's ChatOpenAI. Prints one
JSON line each: the calls it got or ran, or the error that ended it."""

import asyncio
import json
import sys

base_url, model = sys.argv[1], sys.argv[2]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASKED = [{"role": "user", "content": "Weather in Paris?"}]


def openai_sdk(stream):
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    name = "openai-stream" if stream else "openai"
    if not stream:
        raw = client.chat.completions.with_raw_response.create(model=model, messages=ASKED, tools=TOOLS)
        message = raw.parse().choices[0].message
        calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
        return {"framework": name, "calls": calls, "retries": raw.headers.get("x-toolgate-retries"),
                "usage": raw.parse().usage.total_tokens}
    calls = {}
    for chunk in client.chat.completions.create(model=model, messages=ASKED, tools=TOOLS, stream=True):
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                seen = calls.setdefault(call.index, {"name": "", "arguments": ""})
                seen["name"] += call.function.name or ""
                seen["arguments"] += call.function.arguments or ""
    return {"framework": name, "calls": [calls[i] for i in sorted(calls)]}


def agents_sdk(api, stream):
    from agents import (Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                        set_tracing_disabled)
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    ran = []

    @function_tool  # strict by default
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append({"city": city})
        return "sunny"

    client = AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    chosen = {"chat": OpenAIChatCompletionsModel, "responses": OpenAIResponsesModel}[api]
    agent = Agent(name="weather", instructions="Answer about the weather.", tools=[get_weather],
                  model=chosen(model=model, openai_client=client))
    name = f"agents-{api}" + ("-stream" if stream else "")

    async def run():
        if not stream:
            return (await Runner.run(agent, "Weather in Paris?", max_turns=4)).final_output
        result = Runner.run_streamed(agent, "Weather in Paris?", max_turns=4)
        async for _ in result.stream_events():
            pass
        return result.final_output

    try:
        return {"framework": name, "ran": ran, "final_output": asyncio.run(run())}
    except Exception as err:  # the SDK's own refusal, said as the test reads it
        return {"framework": name, "ran": ran, "error": f"{type(err).__name__}: {err}"}


def langgraph(stream):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    ran = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append({"city": city})
        return "sunny"

    chat = ChatOpenAI(base_url=base_url, api_key="sk-test", model=model, max_retries=0, streaming=stream)
    graph = create_react_agent(chat, [get_weather])
    name = "langgraph-stream" if stream else "langgraph"
    asked = {"messages": [("user", "Weather in Paris?")]}
    try:
        if stream:
            final = None
            for state in graph.stream(asked, {"recursion_limit": 8}, stream_mode="values"):
                final = state
        else:
            final = graph.invoke(asked, {"recursion_limit": 8})
        return {"framework": name, "ran": ran, "final_output": final["messages"][-1].content}
    except Exception as err:
        return {"framework": name, "ran": ran, "error": f"{type(err).__name__}: {err}"}


for line in [openai_sdk(False), openai_sdk(True), agents_sdk("chat", False), agents_sdk("chat", True),
             agents_sdk("responses", False), agents_sdk("responses", True), langgraph(False), langgraph(True)]:
    print(json.dumps(line), flush=True)
