"""The stream cursor: what a client has received, as the `id:` of each event.

`{seq}.{draft}.{status}`: the last update delivered (`seq`, -1 for none), how many characters of the answer being
written (the draft above `seq`) were delivered as deltas, and a fingerprint of the last status delivered. Opaque to
clients; it only selects what of a run they are shown, so it is validated, not signed (access is checked by the
route's lookup, as for polls).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

_PATTERN = re.compile(r"^(-1|0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]{0,9})\.([0-9a-f]{8}|-)$")


@dataclass(frozen=True)
class Cursor:
    seq: int = -1
    draft: int = 0
    status: str = "-"

    def encode(self) -> str:
        return f"{self.seq}.{self.draft}.{self.status}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = _PATTERN.fullmatch(text.strip())
        if match is None:
            raise ValueError("not a stream cursor (the id of an event of this stream)")
        return cls(int(match.group(1)), int(match.group(2)), match.group(3))

    def after_update(self, seq: int) -> Cursor:
        # An update covers the draft being written (the answer is stored at the model call's seq): deltas restart.
        return Cursor(seq, 0, self.status)

    def with_draft(self, length: int) -> Cursor:
        return replace(self, draft=length)

    def with_status(self, fingerprint: str) -> Cursor:
        return replace(self, status=fingerprint)


def fingerprint(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2s(canonical.encode("utf-8"), digest_size=4).hexdigest()
