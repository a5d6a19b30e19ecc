"""The decision page of one approval: `GET /api/ui/approvals/{approval_id}?link=...` (a signed, expiring link bound
to the approval) serves the page; `GET /api/runs/{run_id}/approvals/{approval_id}/context` gives it what the approver
needs to decide (the call, the arguments, the run's last messages). Opening the page decides nothing: decisions are
POSTs to the decision route, with the approver's own sign-in (`AUTH_MODE`)."""
