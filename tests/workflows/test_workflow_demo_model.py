"""The shipped `review_pipeline` against the offline demo model (the demo brain, no script): the writer drafts on
the asked topic, the reviewer's structured verdict fits its schema and talks about the draft, the revision does
what the review asked, and the sign-off gate publishes it. Over HTTP on devhost with the real openai client."""

from __future__ import annotations

from workflow_helpers import decide, model_prompts, settle, start, step_ids, view

from scripted_model import DemoBrain


def test_review_pipeline_reads_sensibly_with_the_demo_model(host, model) -> None:
    model.set_script(DemoBrain())
    run_id = start(host, "review_pipeline", {"topic": "durable agents", "audience": "platform engineers"})["run_id"]
    settle(host)
    waiting = view(host, run_id)
    assert waiting["status"] == "requires_action", waiting
    [gate] = waiting["pending_approvals"]

    decide(host, run_id, gate["approval_id"])
    settle(host)
    output = view(host, run_id)["output"]

    [write_prompt, *_] = model_prompts(model, "You are a writer")
    assert write_prompt.startswith("Write a short draft about durable agents")
    draft = output["draft"]
    assert draft.startswith("Durable agents: a short introduction") and "platform engineers" in draft
    assert "email" not in draft.lower()
    review = output["review"]
    assert review["verdict"] in ("approve", "revise") and 0 <= review["score"] <= 10
    assert "Durable agents: a short introduction" in review["comments"] and review["comments"] != "example"
    # This draft has no example: the reviewer asks for one, scores it middling, and the revision adds it.
    assert (review["verdict"], review["score"]) == ("revise", 6)
    assert step_ids(view(host, run_id))[:4] == ["write", "review", "needs_revision", "revise"]
    assert output["revised"] is True and "For example" in draft
    assert output["published"] is True
