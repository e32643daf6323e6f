"""The OpenAI Agents SDK through the model door (Chat Completions, its
default strict tools). MODEL_BASE_URL overrides http://127.0.0.1:4000/v1."""
import asyncio
import os

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    print(f"tool call: get_weather({{'city': '{city}'}})")
    return f"sunny in {city}"


client = AsyncOpenAI(base_url=os.environ.get("MODEL_BASE_URL", "http://127.0.0.1:4000/v1"), api_key="unused",
                     max_retries=0)
agent = Agent(name="weather", instructions="Answer about the weather.", tools=[get_weather],
              model=OpenAIChatCompletionsModel(model="scripted-model", openai_client=client))
print(asyncio.run(Runner.run(agent, "What is the weather in Paris?", max_turns=4)).final_output)
