"""LangChain (LangGraph's prebuilt agent) through the model door.
MODEL_BASE_URL overrides http://127.0.0.1:4000/v1."""
import os

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    print(f"tool call: get_weather({{'city': '{city}'}})")
    return f"sunny in {city}"


model = ChatOpenAI(base_url=os.environ.get("MODEL_BASE_URL", "http://127.0.0.1:4000/v1"), api_key="unused",
                   model="scripted-model", max_retries=0)
agent = create_react_agent(model, [get_weather])
state = agent.invoke({"messages": [("user", "What is the weather in Paris?")]}, {"recursion_limit": 6})
print(state["messages"][-1].content)
