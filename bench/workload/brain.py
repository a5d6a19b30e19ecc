"""`WorkloadBrain`: a stateless scripted-model responder for the `worker` agent.

The last user message says what to do; the brain counts the tool results since that message, so one instance
serves any number of concurrent runs and any retry lands on the same decision:

- `blobs N size S` -> N sequential `fetch_blob` calls of S bytes, then a text answer;
- `steps N`        -> N sequential `record_step` calls, then a text answer;
- `parallel N`     -> N `record_step` calls in one model turn (parallel tool calls), then a text answer;
- `email ADDRESS`  -> one `send_email` (needs approval), then a text answer;
- `emails A B ...` -> one `send_email` per address in one model turn (a batch of approvals), then a text answer;
- `stuck`          -> one `stuck_lookup` (times out), then a text answer quoting the tool error;
- anything else    -> a short text answer (one model call: a plain chat turn).
"""

from __future__ import annotations

import re

from scripted_model.conversation import Conversation
from scripted_model.script import Reply, ScriptedToolCall

_BLOBS = re.compile(r"\bblobs\s+(\d+)\s+size\s+(\d+)\b", re.IGNORECASE)
_STEPS = re.compile(r"\bsteps\s+(\d+)\b", re.IGNORECASE)
_PARALLEL = re.compile(r"\bparallel\s+(\d+)\b", re.IGNORECASE)
_EMAIL = re.compile(r"\bemail\s+(\S+@\S+)", re.IGNORECASE)
_EMAILS = re.compile(r"\bemails((?:\s+\S+@\S+)+)", re.IGNORECASE)
_STUCK = re.compile(r"\bstuck\b", re.IGNORECASE)


def blobs_prompt(steps: int, size: int) -> str:
    return f"blobs {steps} size {size}"


def steps_prompt(steps: int) -> str:
    return f"steps {steps}"


def parallel_prompt(calls: int) -> str:
    return f"parallel {calls}"


def email_prompt(address: str) -> str:
    return f"email {address}"


def emails_prompt(addresses: list[str]) -> str:
    return "emails " + " ".join(addresses)


class WorkloadBrain:
    def respond(self, conversation: Conversation) -> Reply:
        text = conversation.last_user_text
        done = sum(1 for m in conversation.since_last_user if m.get("role") == "tool")
        if match := _BLOBS.search(text):
            steps, size = int(match[1]), int(match[2])
            if done < steps:
                return Reply.call("fetch_blob", {"index": done, "size": size})
            return Reply.say(f"Fetched {steps} blobs.")
        if match := _STEPS.search(text):
            steps = int(match[1])
            if done < steps:
                return Reply.call("record_step", {"key": f"step-{done}"})
            return Reply.say(f"Recorded {steps} steps.")
        if match := _PARALLEL.search(text):
            if done == 0:
                count = int(match[1])
                return Reply(tool_calls=[
                    ScriptedToolCall(name="record_step", arguments={"key": f"p-{i}"}) for i in range(count)
                ])
            return Reply.say(f"Recorded {done} steps in parallel.")
        if match := _EMAILS.search(text):
            if done == 0:
                return Reply(tool_calls=[
                    ScriptedToolCall(name="send_email", arguments={"to": to, "subject": "load test"})
                    for to in match[1].split()
                ])
            return Reply.say(f"Emailed {done}: " + "; ".join(r.content for r in conversation.tool_results[-done:]))
        if match := _EMAIL.search(text):
            if done == 0:
                return Reply.call("send_email", {"to": match[1], "subject": "load test"})
            return Reply.say(f"Email to {match[1]}: {conversation.tool_results[-1].content}")
        if _STUCK.search(text):
            if done == 0:
                return Reply.call("stuck_lookup", {"key": "answer"})
            return Reply.say(f"The lookup said: {conversation.tool_results[-1].content}")
        return Reply.say(f"ok: {text[:80]}")


