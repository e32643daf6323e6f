"""A scripted OpenAI-compatible model server (standard library only) that
makes the mistake real models make: asked with tools, it calls the weather
tool by a drifted name (`GetWeather`) with Python-ish arguments
(`{'city': 'Paris',}`), which the frameworks cannot parse or find; once the
conversation holds the tool's result, it answers in words. Serves
`POST /v1/chat/completions` (whole answers) and `GET /v1/models`.

    python3 examples/model_door/scripted_model_server.py [PORT]   # default 8000
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "scripted-model"


def answer(request: dict) -> dict:
    messages = request.get("messages", [])
    results = [m for m in messages if m.get("role") == "tool"]
    if request.get("tools") and not results:
        call = {"id": "call_1", "type": "function",
                "function": {"name": "GetWeather", "arguments": "{'city': 'Paris',}"}}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    else:
        said = results[-1]["content"] if results else "nothing yet"
        message, finish = {"role": "assistant", "content": f"The weather in Paris: {said}."}, "stop"
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": request.get("model", MODEL),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}


class Handler(BaseHTTPRequestHandler):
    def send_json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        self.send_json(404, {"error": {"message": f"not found: {self.path}"}})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self.send_json(404, {"error": {"message": f"not found: {self.path}"}})
        self.send_json(200, answer(request))

    def log_message(self, *args) -> None:
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"scripted model server on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()
