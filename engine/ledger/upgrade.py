"""The named upgrades of files an earlier claimcheck wrote: each reads (or rewrites) one older
layout as today's, and each is tested on a stored old record (tests/test_upgrades.py).

- `seal`: a session.toml written before claimcheck sealed it:
  `python -m claimcheck.engine.ledger.upgrade DIR`. Such a session replays as before, with one
  observation ("not sealed"); until it is sealed, a reordered key, a line-ending edit or a removed
  meta_digest in it is not caught (docs/evidence-format.md). The upgrade takes the session's lock,
  pins the bytes of every record and history/ revision that verifies (a file that does not verify
  is left unpinned, and replay keeps naming it), and seals session.toml. The next write claimcheck
  makes to the session does the same on its own.
- `job_phase_key`: a job file (status.json, heartbeat, a metrics.jsonl evaluation line) written by
  claimcheck 0.1.0, which named the job's phase `stage`; read as `phase`. The file itself is not
  rewritten: its bytes stay what the dispatch record pinned.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from claimcheck.engine.errors import ClaimcheckError

# The key claimcheck 0.1.0 gave a job's phase in its job files.
OLD_JOB_PHASE_KEY = "stage"


def job_phase_key(doc: dict[str, Any]) -> dict[str, Any]:
    """A job file's JSON object with 0.1.0's `stage` key read as `phase` (a copy; `doc` as it is
    when it has no `stage`, or already a `phase`)."""
    if OLD_JOB_PHASE_KEY not in doc or "phase" in doc:
        return doc
    return {("phase" if key == OLD_JOB_PHASE_KEY else key): value for key, value in doc.items()}


def seal(session_dir: Path) -> list[str]:
    """Pin and seal under the lock; returns the stages whose record or history was left unpinned."""
    from claimcheck.engine.ledger.pins import pins_for
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.pipeline import registry

    session = Session.open(Path(session_dir))
    session.lock.acquire()
    try:
        for name, entry in list(session.meta.stages.items()):
            if name in registry.STAGE_NAMES:
                session.meta.stages[name] = pins_for(session.path, name, entry)
        session._write_meta()
        return [
            name
            for name, entry in session.meta.stages.items()
            if entry.digest and (not entry.file_sha256 or len(entry.history) < entry.revision - 1)
        ]
    finally:
        session.lock.release()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m claimcheck.engine.ledger.upgrade SESSION_DIR", file=sys.stderr)
        return 2
    try:
        left = seal(Path(argv[0]))
    except ClaimcheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"sealed {argv[0]}" + (f"; left unpinned (they do not verify): {', '.join(left)}" if left else ""))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
