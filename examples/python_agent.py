"""An agent loop through toolgate, with a scripted model (no network, no API
key) that drifts as models do. From the repository's root: run the gateway
on the shipped catalogue (`cargo run --release -- serve --pack courier`),
install the client once (`pip install clients/python`, or `pip install -e
clients/python`), then `python examples/python_agent.py`; TOOLGATE_ADDR
overrides 127.0.0.1:50051."""
import json
import os
import sys

from toolgate import Gateway


def call(name: str, arguments: str, n: int) -> dict:
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": arguments}}


def scripted_model(messages: list[dict]) -> dict:
    """Plays the assistant: each reply reads the last tool result."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:  # a CamelCase name and a fenced argument object
        return {"role": "assistant", "tool_calls": [call("TrackParcel", '```json\n{"code": "PK-1001"}\n```', 1)]}
    if len(results) == 1:  # Sunday is day 7; the model says 8
        return {"role": "assistant", "tool_calls": [call("reschedule_delivery", '{"code": "PK-1001", "day": 8}', 2)]}
    if "must be between 1 and 7" in results[-1]:  # corrected from the gateway's message
        return {"role": "assistant", "tool_calls": [call("reschedule_delivery", '{"code": "PK-1001", "day": 7}', 3)]}
    due = json.loads(results[-1])["due"]
    return {"role": "assistant", "content": f"Done: parcel PK-1001 now arrives on {due}."}


def main() -> int:
    gateway = Gateway(os.environ.get("TOOLGATE_ADDR", "127.0.0.1:50051"))
    messages: list[dict] = [{"role": "user", "content": "Where is PK-1001? Deliver it on Sunday."}]
    for _ in range(6):
        reply = scripted_model(messages)
        messages.append(reply)
        print(f"assistant: {reply.get('content') or json.dumps(reply['tool_calls'])}")
        if "tool_calls" not in reply:
            return 0
        for message in gateway.execute_openai(reply["tool_calls"], session_id="demo-conversation"):
            messages.append(message)
            print(f"tool:      {message['content']}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
