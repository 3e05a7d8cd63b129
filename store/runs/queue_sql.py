"""SQL text for the run queue, leases and workers (executed by :mod:`store.runs.run_queue`)."""

from __future__ import annotations

# A queued run waits as 'pending' with queued_at_ms set; a running queued run whose lease has
# expired (its worker died or stalled) is claimable again. Oldest first.
_CLAIMABLE = """queued_at_ms IS NOT NULL AND (
        status = 'pending'
        OR (status = 'running' AND coalesce(lease_expires_at_ms, 0) <= :now))"""

# Each claim raises the fencing token; cancel and clear requests stay for the new holder.
CLAIM_NEXT = f"""
UPDATE runs SET status = 'running', owner_id = :owner_id, lease_token = lease_token + 1,
    lease_expires_at_ms = :now + :lease_ms, heartbeat_at_ms = :now,
    started_at_ms = coalesce(started_at_ms, :now), finished_at_ms = NULL, error = NULL,
    updated_at_ms = :now
WHERE run_id = (
    SELECT run_id FROM runs WHERE {_CLAIMABLE} ORDER BY queued_at_ms, run_id LIMIT 1
)
RETURNING *
"""

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
# (PostgreSQL also locks the row, so a claim and a fenced write never interleave.)
HOLD_LEASE = "SELECT 1 FROM runs WHERE run_id = :run_id AND lease_token = :token"

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

RUNS_HELD_BY = """
SELECT run_id FROM runs WHERE owner_id = :owner_id AND status = 'running' ORDER BY run_id
"""
