"""The Functions app: wiring only. The `agent_run` and `workflow` orchestrators and their activities; the HTTP routes
(`http_api.routes`: one declaration per route gives its function, its path checks and its OpenAPI operation).

Runs on Azure Functions (Durable extension), `func start` on a laptop, and devhost (`python -m devhost`).
"""

from agent_runtime.model_builds import deferred_model_builds

with deferred_model_builds():  # the models of the modules below are built on first use: a cold start builds few
    import azure.durable_functions as df
    import azure.functions as func

    from activities.agent_run_steps import AGENT_RUN_ACTIVITIES
    from activities.workflow_activities import WORKFLOW_ACTIVITIES
    from agent_runs.services import RunServices
    from agent_runtime.gc_policy import tune_garbage_collector
    from http_api import routes
    from notifications.registry import NOTIFICATION_ACTIVITIES, NOTIFICATION_ORCHESTRATORS
    from orchestrators.agent_run import agent_run
    from orchestrators.workflow import workflow
    from telemetry import configure_telemetry
    from workflow_runtime.registry import load_workflows

configure_telemetry()  # OpenTelemetry from the environment, once per process (devhost workers import the app too)
tune_garbage_collector()  # fewer young-generation collections: ~2 % of a turn's CPU
app = df.DFApp(http_auth_level=func.AuthLevel.FUNCTION)

# ----------------------------------------------------------------------------------------------- orchestration
app.orchestration_trigger(context_name="context")(agent_run)
for agent_run_activity in AGENT_RUN_ACTIVITIES:  # its queue wait's `take_turn` too
    agent_run_activity.register(app)

# ----------------------------------------------------------------------------------------------- workflows
load_workflows(RunServices.current().agents.names())  # definitions are checked at start-up, against the agents
app.orchestration_trigger(context_name="context")(workflow)
for workflow_activity in WORKFLOW_ACTIVITIES:
    workflow_activity.register(app)

# ----------------------------------------------------------------------------------------------- notifications
for notification_orchestrator in NOTIFICATION_ORCHESTRATORS:  # one delivery orchestration per subscription and run
    app.orchestration_trigger(context_name="context")(notification_orchestrator)
for notification_activity in NOTIFICATION_ACTIVITIES:
    notification_activity.register(app)

# ----------------------------------------------------------------------------------------------- HTTP
routes.register(app)  # every route of the table, as a function taking the HTTP streaming extension's Request
