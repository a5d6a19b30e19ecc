"""The stream cursor: what a client has received, as the `id:` of each event.

`{seq}.{draft_seq}.{draft}.{status}[.{draft_fp}][.done.{done_fp}]`: the last update delivered (`seq`, -1 for none),
the seq of the answer being written that deltas were sent for (0 for none) and how many of its characters were sent, a
fingerprint of the last status delivered, and (while deltas were sent) a fingerprint of the text sent. A retried model
call starts its answer over at the same seq: only the text's fingerprint tells a client's text from the new answer's
first characters (a length alone would append the new answer's tail to the old one's head). The draft is named by its
seq because a draft's deltas may reach a client before updates below it (the tokens are live, the updates wait for the
step to be committed). Opaque to clients; it only selects what of a run they are shown, so it is validated, not signed
(access is checked by the route's lookup, as polls). `.done.{done_fp}` marks the id of the `done` event, with a
fingerprint of it: a client that reconnects with it has had everything (`204 No Content`, which tells an `EventSource`
to stop reconnecting) unless the run ended otherwise since (a rewind that failed again writes no update and may leave
the status as it was: only its `done` differs). The fingerprint is of the run's own end (`done_fingerprint`), not of
the links in it, which are built from the request's host: a client back through another host name has had it too.
A plain `.done` is the id of `done` as sent before it carried a fingerprint (a client reconnecting across the deploy
that added it): it is answered as it was then, 204 once the run is finished, whichever way it ended.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .feeds import Draft

_NUMBER = r"(0|[1-9][0-9]{0,15})"
_FP = r"([0-9a-f]{8})"
_PATTERN = re.compile(rf"^(-1|{_NUMBER})\.{_NUMBER}\.{_NUMBER}\.({_FP[1:-1]}|-)(?:\.{_FP})?(\.done(?:\.{_FP})?)?$")
# `Cursor.done` of a plain `.done`: the client had a `done`, which one is not known (an id from before fingerprints).
ANY_DONE = "*"


@dataclass(frozen=True)
class Cursor:
    seq: int = -1
    draft_seq: int = 0
    draft: int = 0
    status: str = "-"
    draft_fp: str = "-"  # fingerprint of the draft text sent ("-": none, or a cursor from before it was recorded)
    done: str = "-"  # fingerprint of the `done` the client has had ("-": none; `ANY_DONE`: one, not known which)

    def encode(self) -> str:
        text_fp = f".{self.draft_fp}" if self.draft_fp != "-" else ""
        done_fp = {"-": "", ANY_DONE: ".done"}.get(self.done, f".done.{self.done}")
        return f"{self.seq}.{self.draft_seq}.{self.draft}.{self.status}{text_fp}{done_fp}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = _PATTERN.fullmatch(text.strip())
        if match is None:
            raise ValueError("not a stream cursor (the id of an event of this stream)")
        done = match.group(8) or (ANY_DONE if match.group(7) else "-")
        return cls(int(match.group(1)), int(match.group(3)), int(match.group(4)), match.group(5),
                   match.group(6) or "-", done)

    def after_update(self, seq: int) -> Cursor:
        if seq >= self.draft_seq:  # the finished answer (stored at its draft's seq) covers the deltas sent
            return Cursor(seq, 0, 0, self.status)  # (and no draft text fingerprint)
        return replace(self, seq=seq)

    def sent_of(self, draft: Draft) -> int | None:
        """How many characters of `draft` this client has; None when what it has is not the start of the draft's text
        (a retried model call started over): the client's text must be replaced."""
        if draft.seq != self.draft_seq:
            return 0
        if self.draft > len(draft.text):
            return None
        if self.draft_fp != "-" and draft.fingerprint(self.draft) != self.draft_fp:
            return None
        return self.draft

    def with_draft(self, draft: Draft) -> Cursor:
        return replace(self, draft_seq=draft.seq, draft=len(draft.text), draft_fp=draft.fingerprint(len(draft.text)))

    def with_status(self, fingerprint: str) -> Cursor:
        return replace(self, status=fingerprint)


def fingerprint(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2s(canonical.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


def done_fingerprint(done: dict[str, Any]) -> str:
    """The fingerprint of a `done` event as the run's own end: its `links` are left out, as they are built from the
    request's host (`run_views.links`, `workflow_views.links`) and the same end reached through another host name is
    the same end."""
    return fingerprint({name: value for name, value in done.items() if name != "links"})


def text_fingerprint(text: str) -> str:
    return text_hasher(text).hexdigest()


def text_hasher(text: str) -> Any:
    """The hash of `text` that `text_fingerprint` digests, to extend with what follows (`update(text_bytes(more))`)."""
    return hashlib.blake2s(text_bytes(text), digest_size=4)


def text_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate a model streamed is text to fingerprint too
