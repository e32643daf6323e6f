"""Strict tools through the model door, as two frameworks send them by
default: the OpenAI Agents SDK's `function_tool` (`strict_json_schema=True`:
every parameter required, an optional one as `anyOf: [T, {type: null}]`,
`additionalProperties: false`), the same tool sent non-strict, and Pydantic
AI's tools (`strict: true` on a tool whose parameters are all required, and
on one declared `strict=True`). Each runs `get_weather(city, days=None)`
against the model at `base_url` and prints one JSON line: what it ran, or
the error that ended the run."""

import asyncio
import json
import sys

base_url, model = sys.argv[1], sys.argv[2]


def agents_sdk(strict):
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    ran = []

    def get_weather(city: str, days: int | None = None) -> str:
        """The weather in a city, for some days."""
        ran.append({"city": city, "days": days})
        return "sunny"

    tool = function_tool(get_weather, strict_mode=strict)
    client = AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    agent = Agent(name="weather", instructions="Answer about the weather.", tools=[tool],
                  model=OpenAIChatCompletionsModel(model=model, openai_client=client))
    name = "agents-strict" if strict else "agents"
    try:
        asyncio.run(Runner.run(agent, "Weather in Paris?", max_turns=3))
        return {"framework": name, "ran": ran}
    except Exception as err:
        return {"framework": name, "ran": ran, "error": f"{type(err).__name__}: {err}"}


def pydantic_ai(strict):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    ran = []
    provider = OpenAIProvider(base_url=base_url, api_key="sk-test")
    agent = Agent(OpenAIChatModel(model, provider=provider), retries=0)

    # Without `strict`, Pydantic AI sends `strict: true` when every
    # parameter is required; with it, optional ones become nullable.
    if strict:
        @agent.tool_plain(strict=True)
        def get_weather(city: str, days: int | None = None) -> str:
            """The weather in a city, for some days."""
            ran.append({"city": city, "days": days})
            return "sunny"
    else:
        @agent.tool_plain
        def get_weather(city: str, days: int | None) -> str:
            """The weather in a city, for some days."""
            ran.append({"city": city, "days": days})
            return "sunny"

    name = "pydantic-ai-strict" if strict else "pydantic-ai"
    try:
        agent.run_sync("Weather in Paris?")
        return {"framework": name, "ran": ran}
    except Exception as err:
        return {"framework": name, "ran": ran, "error": f"{type(err).__name__}: {err}"}


for line in [agents_sdk(True), agents_sdk(False), pydantic_ai(True), pydantic_ai(False)]:
    print(json.dumps(line))
