"""The `anthropic` SDK against the model door's Messages API: a whole
`messages.create` and a streamed one (`messages.stream`, its final
message). Prints one JSON line each: the `tool_use` blocks it got, its
text, its `stop_reason` (streamed: the block indexes started), or the
error the SDK raised."""

import json
import sys

import anthropic

base_url, model = sys.argv[1], sys.argv[2]

TOOL = {"name": "get_weather", "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)
ASK = dict(model=model, max_tokens=256, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[TOOL])


def said(message, name, **more):
    calls = [{"name": b.name, "input": b.input, "id": b.id} for b in message.content if b.type == "tool_use"]
    text = "".join(b.text for b in message.content if b.type == "text")
    return {"client": name, "calls": calls, "text": text, "stop_reason": message.stop_reason, **more}


try:
    print(json.dumps(said(client.messages.create(**ASK), "whole")))
except Exception as err:  # what the client raised, said as the test reads it
    print(json.dumps({"client": "whole", "calls": [], "error": f"{type(err).__name__}: {err}"}))
started = []
try:
    with client.messages.stream(**ASK) as stream:
        for event in stream:
            if event.type == "content_block_start":
                started.append(event.index)
        final = stream.get_final_message()
    print(json.dumps(said(final, "stream", started=started)))
except Exception as err:
    print(json.dumps({"client": "stream", "calls": [], "error": f"{type(err).__name__}: {err}"}))
