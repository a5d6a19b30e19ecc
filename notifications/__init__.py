"""Approvals reach people where they are: signed webhooks (Standard Webhooks), Slack and Teams messages, and a signed
decision page per approval.

- `events`, `payloads`, `signing`, `backoff`, `links`: the sans-IO core (what an event says, how each channel shows
  it, how it is signed, when to retry);
- `subscriptions`, `destinations`, `outbox`, `sender`: where events go, which hosts are allowed, the per-run event log
  in the session store, one HTTP attempt;
- `activities`, `orchestrator`, `hooks`: durable delivery (one orchestration per subscription and run) and the small
  calls the run orchestrator makes after each transition.
"""
