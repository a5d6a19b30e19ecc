"""Engine runtime (being written; see api.py for the contract)."""


class EngineRuntime:
    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError("engine runtime not written yet")
