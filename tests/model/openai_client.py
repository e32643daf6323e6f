"""The `openai` Python SDK against the model door: one chat completion with
a get_weather tool, streamed or not; prints what the SDK handed back as one
JSON line (the streamed deltas put together as the SDK's users do)."""

import json
import sys

import openai

base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key="sk-test-caller", max_retries=0)
tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
messages = [{"role": "user", "content": "Weather in Paris?"}]
try:
    if mode == "whole":
        raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, tools=tools)
        completion = raw.parse()
        choice = completion.choices[0]
        calls = [{"id": c.id, "name": c.function.name, "arguments": json.loads(c.function.arguments)}
                 for c in choice.message.tool_calls or []]
        print(json.dumps({"content": choice.message.content, "tool_calls": calls,
                          "finish_reason": choice.finish_reason,
                          "repairs": raw.headers.get("x-toolgate-repairs")}))
    else:
        content, calls, finish = "", {}, None
        for chunk in client.chat.completions.create(model=model, messages=messages, tools=tools, stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            content += delta.content or ""
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = entry["id"] or call.id
                entry["name"] += (call.function.name or "") if call.function else ""
                entry["arguments"] += (call.function.arguments or "") if call.function else ""
            finish = chunk.choices[0].finish_reason or finish
        calls = [dict(c, arguments=json.loads(c["arguments"])) for _, c in sorted(calls.items())]
        print(json.dumps({"content": content, "tool_calls": calls, "finish_reason": finish}))
except openai.APIError as err:
    print(json.dumps({"error": type(err).__name__, "message": str(err)}))
