"""Responses API clients against the model door: the `openai` SDK's
`responses.create` (whole and streamed) and the OpenAI Agents SDK's
default model (`OpenAIResponsesModel`, strict function tools) in a whole
run (`Runner.run` and `Runner.run_streamed`). Prints one JSON line each:
the calls it got (streamed: the events' sequence numbers and where items
were added), or what it ran."""

import asyncio
import json
import sys

base_url, model = sys.argv[1], sys.argv[2]

TOOL = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                       "additionalProperties": False}}


def sdk():
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    response = client.responses.create(model=model, input="Weather in Paris?", tools=[TOOL])
    def arguments(text):
        try:
            return json.loads(text)
        except ValueError:
            return text

    calls = [{"name": item.name, "arguments": arguments(item.arguments), "call_id": item.call_id, "id": item.id}
             for item in response.output if item.type == "function_call"]
    return {"client": "sdk", "calls": calls, "text": response.output_text}


def sdk_stream():
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    sequence, indexes, added, completed = [], [], [], None
    for event in client.responses.create(model=model, input="Weather in Paris?", tools=[TOOL], stream=True):
        sequence.append(event.sequence_number)
        if event.type == "response.output_item.added":
            added.append(event.output_index)
        if event.type == "response.completed":
            completed = event.response
    calls = [{"name": item.name, "arguments": item.arguments, "call_id": item.call_id, "id": item.id}
             for item in completed.output if item.type == "function_call"]
    return {"client": "sdk-stream", "calls": calls, "text": completed.output_text, "sequence": sequence,
            "added": added}


async def agents_sdk(streamed):
    name = "agents-stream" if streamed else "agents"
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
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
                  model=OpenAIResponsesModel(model=model, openai_client=client))
    try:
        if streamed:
            result = Runner.run_streamed(agent, "Weather in Paris?", max_turns=3)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, "Weather in Paris?", max_turns=3)
        return {"client": name, "ran": ran, "final_output": result.final_output}
    except Exception as err:
        return {"client": name, "ran": ran, "error": f"{type(err).__name__}: {err}"}


print(json.dumps(sdk()))
print(json.dumps(sdk_stream()))
print(json.dumps(asyncio.run(agents_sdk(False))))
print(json.dumps(asyncio.run(agents_sdk(True))))
