"""The HTTP side of notifications: the per-run webhook check, the delivery log and redeliver routes, the decision
page, Slack's interactions."""
