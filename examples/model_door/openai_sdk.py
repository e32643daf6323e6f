"""The openai SDK through the model door: the model's broken call arrives
repaired (`get_weather`, `{"city": "Paris"}`), the tool runs, the model
answers. MODEL_BASE_URL overrides http://127.0.0.1:4000/v1."""
import json
import os

from openai import OpenAI

client = OpenAI(base_url=os.environ.get("MODEL_BASE_URL", "http://127.0.0.1:4000/v1"), api_key="unused")
tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
messages = [{"role": "user", "content": "What is the weather in Paris?"}]
reply = client.chat.completions.create(model="scripted-model", messages=messages, tools=tools).choices[0].message
for call in reply.tool_calls or []:
    arguments = json.loads(call.function.arguments)  # raises on the model's own {'city': 'Paris',}
    print(f"tool call: {call.function.name}({arguments})")
    messages += [reply.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": f"sunny in {arguments['city']}"}]
print(client.chat.completions.create(model="scripted-model", messages=messages, tools=tools).choices[0].message.content)
