"""`ClientActivity`: a `durable_steps.Activity` that also takes the Durable client binding, so it can start or wake
another orchestration (Functions gives any function the `durableClient` binding; devhost too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, get_type_hints

import azure.durable_functions as df
from pydantic import BaseModel

from durable_steps import DEFAULT_RETRY, Activity
from durable_steps.activity import within_budget_any

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT")
CLIENT = "client"


class ClientActivity(Activity[InputT, OutputT]):
    def __init__(self, function: Callable[[InputT, df.DurableOrchestrationClient], Awaitable[OutputT]],
                 **options: Any) -> None:
        hints = get_type_hints(function)
        first = next(iter(hints))
        super().__init__(function, input_model=hints[first], output_type=hints["return"], **options)  # type: ignore[arg-type]
        self._with_client = function

    async def execute_with(self, payload: Any, client: df.DurableOrchestrationClient) -> Any:
        output = await self._with_client(self.input_model.model_validate(payload), client)
        return within_budget_any(self._output.dump_python(output, mode="json"), f"{self.name} result", self.budget)

    def register(self, app: df.DFApp) -> None:
        execute = self.execute_with

        async def trigger(payload: Any, client: df.DurableOrchestrationClient) -> Any:
            return await execute(payload, client)

        trigger.__name__ = trigger.__qualname__ = self.name
        app.activity_trigger(input_name="payload")(app.durable_client_input(client_name=CLIENT)(trigger))


def client_activity(
    *, retry: df.RetryOptions | None = DEFAULT_RETRY
) -> Callable[[Callable[[InputT, df.DurableOrchestrationClient], Awaitable[OutputT]]], ClientActivity[InputT, OutputT]]:
    def declare(
        function: Callable[[InputT, df.DurableOrchestrationClient], Awaitable[OutputT]],
    ) -> ClientActivity[InputT, OutputT]:
        return ClientActivity(function, retry=retry)

    return declare
