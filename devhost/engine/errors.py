"""Engine errors. The HOST maps them to the status codes of the extension's HttpApiHandler."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine API raises on purpose."""


class UnknownFunctionError(EngineError):
    """start_new / signal_entity named a function that does not exist (HTTP 400). Message is the extension's text."""


class InvalidInstanceIdError(EngineError):
    """Instance id starts with '@', contains / \\ ? # or control characters, or is longer than 256 (HTTP 400)."""


class InvalidEntityKeyError(EngineError):
    """Entity key contains / \\ ? # or control characters (HTTP 400)."""


class InstanceExistsError(EngineError):
    """start_new with the id of an instance that is Pending/Running/Suspended (the extension refuses to override)."""


class InstanceNotFoundError(EngineError):
    """No such instance (HTTP 404)."""


class InstanceGoneError(EngineError):
    """The instance already reached a terminal state (HTTP 410)."""


class InvalidOperationError(EngineError):
    """The operation does not apply to the instance's current state (e.g. rewind of a non-failed instance)."""


class EngineClosedError(EngineError):
    """The engine was closed, or crashed by fault injection (`SimulatedCrash`)."""


class SimulatedCrash(EngineError):
    """Raised by fault injection at a commit step: the engine stops as if the process had been killed there."""
