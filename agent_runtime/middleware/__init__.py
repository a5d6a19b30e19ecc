"""Middleware: onion pipelines around a run, each model call and each tool call, plus built-in layers."""

from .audit import AuditLogMiddleware, AuditSink, log_sink
from .contexts import AgentRunContext, ChatContext, FunctionInvocationContext
from .guardrails import GuardrailMiddleware
from .pipeline import CallNext, ChatMiddleware, Middleware, MiddlewareLike, MiddlewarePipeline, MiddlewareTermination
from .retry import RetryMiddleware
from .truncation import HistoryTruncationMiddleware, estimate_tokens, truncate_history
from .usage import UsageAccountingMiddleware, UsageBudgetExceeded, UsageLedger

__all__ = [
    "AgentRunContext",
    "AuditLogMiddleware",
    "AuditSink",
    "CallNext",
    "ChatContext",
    "ChatMiddleware",
    "FunctionInvocationContext",
    "GuardrailMiddleware",
    "HistoryTruncationMiddleware",
    "Middleware",
    "MiddlewareLike",
    "MiddlewarePipeline",
    "MiddlewareTermination",
    "RetryMiddleware",
    "UsageAccountingMiddleware",
    "UsageBudgetExceeded",
    "UsageLedger",
    "estimate_tokens",
    "log_sink",
    "truncate_history",
]
