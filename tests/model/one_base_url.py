"""One base_url for chat and embeddings, as a LangChain app is written:
ChatOpenAI with a tool and OpenAIEmbeddings, both pointed at the model door
(`base_url`); the embeddings pass through to the model server unchanged.
Prints one JSON line: the embedding's values and the chat's tool calls."""

import json
import sys

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

base_url, model = sys.argv[1], sys.argv[2]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


embeddings = OpenAIEmbeddings(base_url=base_url, api_key="sk-test", model="embed-small",
                              check_embedding_ctx_length=False)
vector = embeddings.embed_query("Weather in Paris?")
chat = ChatOpenAI(base_url=base_url, api_key="sk-test", model=model, max_retries=0).bind_tools([get_weather])
message = chat.invoke("Weather in Paris?")
print(json.dumps({"framework": "langchain", "embedding": vector, "tool_calls": [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]}))
