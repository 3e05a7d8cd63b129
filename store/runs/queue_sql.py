"""SQL text for the run queue, leases and workers (executed by :mod:`store.runs.run_queue`)."""

from __future__ import annotations

from store.db.dialect import Statement

# A queued run waits as 'pending' with queued_at_ms set; a running queued run whose lease has
# expired (its worker died or stalled) is claimable again. Oldest first.
_CLAIMABLE = """queued_at_ms IS NOT NULL AND (
        status = 'pending'
        OR (status = 'running' AND coalesce(lease_expires_at_ms, 0) <= :now))"""

_CLAIM = """SET status = 'running', owner_id = :owner_id, lease_token = {r}lease_token + 1,
    lease_expires_at_ms = :now + :lease_ms, heartbeat_at_ms = :now,
    started_at_ms = coalesce({r}started_at_ms, :now), finished_at_ms = NULL, error = NULL,
    updated_at_ms = :now"""
_OLDEST_CLAIMABLE = (
    f"SELECT run_id FROM runs WHERE {_CLAIMABLE} ORDER BY queued_at_ms, run_id LIMIT 1"
)

# Each claim raises the fencing token; cancel and clear requests stay for the new holder.
# PostgreSQL locks its candidate row with FOR UPDATE SKIP LOCKED: workers claiming at once each
# take a different run without waiting on each other (SQLite has one writer at a time).
CLAIM_NEXT = Statement(
    f"UPDATE runs {_CLAIM.format(r='')}\nWHERE run_id = ({_OLDEST_CLAIMABLE})\nRETURNING *\n",
    postgres=f"""WITH candidate AS ({_OLDEST_CLAIMABLE} FOR UPDATE SKIP LOCKED)
UPDATE runs r {_CLAIM.format(r='r.')}
FROM candidate WHERE r.run_id = candidate.run_id
RETURNING r.*
""",
)

ENQUEUE = """
UPDATE runs SET queued_at_ms = coalesce(queued_at_ms, :now), updated_at_ms = :now
WHERE run_id = :run_id AND status = 'pending'
"""

# Renew the lease only while this worker still holds it under this token.
RENEW_LEASE = """
UPDATE runs SET heartbeat_at_ms = :now, lease_expires_at_ms = :now + :lease_ms
WHERE run_id = :run_id AND owner_id = :owner_id AND lease_token = :token AND status = 'running'
"""

# Give a run back at once (a worker stopping): the next claim need not wait for expiry.
RELEASE_LEASE = """
UPDATE runs SET lease_expires_at_ms = 0, updated_at_ms = :now
WHERE run_id = :run_id AND owner_id = :owner_id AND lease_token = :token AND status = 'running'
"""

# The fence every write of a leased run passes first: the run is still held under this token.
# PostgreSQL also locks the row (FOR NO KEY UPDATE) for the rest of the writing transaction, so
# a claim by another worker either commits before it (and the fence finds a new token) or waits.
_HOLD_LEASE = "SELECT 1 FROM runs WHERE run_id = :run_id AND lease_token = :token"
HOLD_LEASE = Statement(_HOLD_LEASE, postgres=f"{_HOLD_LEASE} FOR NO KEY UPDATE")

QUEUE_DEPTH = "SELECT count(*) FROM runs WHERE queued_at_ms IS NOT NULL AND status = 'pending'"

UPSERT_WORKER = """
INSERT INTO workers (worker_id, host, pid, started_at_ms, heartbeat_at_ms, runs_held)
VALUES (:worker_id, :host, :pid, :now, :now, :runs_held)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at_ms = excluded.heartbeat_at_ms,
    runs_held = excluded.runs_held, stopped_at_ms = NULL
"""

STOP_WORKER = """
UPDATE workers SET stopped_at_ms = :now, heartbeat_at_ms = :now, runs_held = 0
WHERE worker_id = :worker_id
"""

LIST_WORKERS = """
SELECT worker_id, host, pid, started_at_ms, heartbeat_at_ms, runs_held, stopped_at_ms
FROM workers WHERE stopped_at_ms IS NULL OR stopped_at_ms >= :since
ORDER BY started_at_ms DESC LIMIT :limit
"""


# The runs marked running with their leases, newest first (what `tether doctor` reports).
RUNNING_LEASES = """
SELECT run_id, owner_id, heartbeat_at_ms, lease_expires_at_ms FROM runs WHERE status = 'running'
ORDER BY created_at_ms DESC LIMIT :limit
"""
