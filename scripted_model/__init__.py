"""A small scripted OpenAI-compatible chat-completions server, for tests, benchmarks and the offline demo.

from scripted_model import ScriptedModelServer, Script, Reply, Fault, DemoBrain

with ScriptedModelServer(Script.of(Reply.call("get_weather", {"city": "Paris"}), "Sunny in Paris.")) as server:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused")
    ...
    assert server.log.last.roles == ["system", "user", "assistant", "tool"]
"""

from .conversation import ChatCompletionRequest, Conversation, ToolResult
from .demo import DemoBrain, start_demo_server
from .engine import Responder, ScriptEngine, ScriptExhausted
from .request_log import RecordedRequest, RequestLog
from .script import Fault, Match, Reply, Rule, Script, ScriptedToolCall, ScriptPlayer
from .server import ScriptedModelServer

__all__ = [
    "ChatCompletionRequest",
    "Conversation",
    "DemoBrain",
    "Fault",
    "Match",
    "RecordedRequest",
    "Reply",
    "RequestLog",
    "Responder",
    "Rule",
    "Script",
    "ScriptEngine",
    "ScriptExhausted",
    "ScriptPlayer",
    "ScriptedModelServer",
    "ScriptedToolCall",
    "ToolResult",
    "start_demo_server",
]
