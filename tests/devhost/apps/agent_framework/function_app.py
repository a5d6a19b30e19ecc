"""Microsoft Agent Framework's AgentFunctionApp (durable-protocol.md E.7.2): an agent entity + an orchestration."""

import os

import azure.durable_functions as df
import azure.functions as func
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework_azurefunctions import AgentFunctionApp

client = OpenAIChatCompletionClient(model=os.environ.get("OPENAI_MODEL", "fake-model"),
                                    api_key=os.environ.get("OPENAI_API_KEY", "not-used"),
                                    base_url=os.environ["OPENAI_BASE_URL"])
joker = client.as_agent(name="Joker", instructions="You tell jokes.")
app = AgentFunctionApp(agents=[joker], http_auth_level=func.AuthLevel.ANONYMOUS)



@app.orchestration_trigger(context_name="context")
def joke_chain(context: df.DurableOrchestrationContext):
    agent = app.get_agent(context, "Joker")
    session = agent.create_session()
    first = yield agent.run("first joke please", session=session)
    second = yield agent.run("another one", session=session)
    return {"first": first.text, "second": second.text}
