"""One shape for durable steps: an activity is declared once (`activity.Activity`) and everything else - the
function registered with the Functions app, the orchestrator's call, the validation of its input and output, its
retry and payload budget - comes from that declaration."""

from durable_steps.activity import DEFAULT_RETRY, OUTAGE_RETRIES, Activity, activity

__all__ = ["DEFAULT_RETRY", "OUTAGE_RETRIES", "Activity", "activity"]
