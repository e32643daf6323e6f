"""Agent frameworks against the model door, each as its users write it,
with a get_weather tool: LangChain's ChatOpenAI (whole and streamed) and
the OpenAI Agents SDK's OpenAIChatCompletionsModel (a whole run: the model
calls the tool, the SDK runs it, the model answers). Prints one JSON line
per framework: the calls it parsed, the ones it could not, what it ran."""

import asyncio
import json
import sys

base_url, model = sys.argv[1], sys.argv[2]


def langchain(stream):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    chat = ChatOpenAI(base_url=base_url, api_key="sk-test", model=model, max_retries=0).bind_tools([get_weather])
    if stream:
        message = None
        for chunk in chat.stream("Weather in Paris?"):
            message = chunk if message is None else message + chunk
    else:
        message = chat.invoke("Weather in Paris?")
    return {
        "framework": "langchain-stream" if stream else "langchain",
        "tool_calls": [{"name": c["name"], "args": c["args"]} for c in message.tool_calls],
        "invalid_tool_calls": [{"name": c.get("name"), "args": c.get("args")} for c in message.invalid_tool_calls],
    }


async def agents_sdk():
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    ran = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append({"city": city})
        return "sunny"

    client = AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    agent = Agent(name="weather", instructions="Answer about the weather.", tools=[get_weather],
                  model=OpenAIChatCompletionsModel(model=model, openai_client=client))
    try:
        result = await Runner.run(agent, "Weather in Paris?", max_turns=3)
        return {"framework": "agents", "ran": ran, "final_output": result.final_output}
    except Exception as err:  # the SDK's own refusal, said as the test expects it
        return {"framework": "agents", "ran": ran, "error": f"{type(err).__name__}: {err}"}


print(json.dumps(langchain(False)))
print(json.dumps(langchain(True)))
print(json.dumps(asyncio.run(agents_sdk())))
