"""PostgreSQL twins of :mod:`store.runs.queue_sql`.

The claim locks its candidate row with ``FOR UPDATE SKIP LOCKED``: workers claiming at once each
take a different run without waiting on each other. The fence locks the run row (``FOR NO KEY
UPDATE``) for the rest of the writing transaction, so a claim by another worker either commits
before it (and the fence then finds a new token and refuses) or waits until it committed.
"""

from __future__ import annotations

_CLAIMABLE = """queued_at_ms IS NOT NULL AND (
        status = 'pending'
        OR (status = 'running' AND coalesce(lease_expires_at_ms, 0) <= %(now)s))"""

CLAIM_NEXT = f"""
WITH candidate AS (
    SELECT run_id FROM runs WHERE {_CLAIMABLE}
    ORDER BY queued_at_ms, run_id LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE runs r SET status = 'running', owner_id = %(owner_id)s, lease_token = r.lease_token + 1,
    lease_expires_at_ms = %(now)s + %(lease_ms)s, heartbeat_at_ms = %(now)s,
    started_at_ms = coalesce(r.started_at_ms, %(now)s), finished_at_ms = NULL, error = NULL,
    updated_at_ms = %(now)s
FROM candidate WHERE r.run_id = candidate.run_id
RETURNING r.*
"""

ENQUEUE = """
UPDATE runs SET queued_at_ms = coalesce(queued_at_ms, %(now)s), updated_at_ms = %(now)s
WHERE run_id = %(run_id)s AND status = 'pending'
"""

RENEW_LEASE = """
UPDATE runs SET heartbeat_at_ms = %(now)s, lease_expires_at_ms = %(now)s + %(lease_ms)s
WHERE run_id = %(run_id)s AND owner_id = %(owner_id)s AND lease_token = %(token)s
  AND status = 'running'
"""

RELEASE_LEASE = """
UPDATE runs SET lease_expires_at_ms = 0, updated_at_ms = %(now)s
WHERE run_id = %(run_id)s AND owner_id = %(owner_id)s AND lease_token = %(token)s
  AND status = 'running'
"""

HOLD_LEASE = """
SELECT 1 FROM runs WHERE run_id = %(run_id)s AND lease_token = %(token)s FOR NO KEY UPDATE
"""

QUEUE_DEPTH = "SELECT count(*) FROM runs WHERE queued_at_ms IS NOT NULL AND status = 'pending'"

UPSERT_WORKER = """
INSERT INTO workers (worker_id, host, pid, started_at_ms, heartbeat_at_ms, runs_held)
VALUES (%(worker_id)s, %(host)s, %(pid)s, %(now)s, %(now)s, %(runs_held)s)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at_ms = excluded.heartbeat_at_ms,
    runs_held = excluded.runs_held, stopped_at_ms = NULL
"""

STOP_WORKER = """
UPDATE workers SET stopped_at_ms = %(now)s, heartbeat_at_ms = %(now)s, runs_held = 0
WHERE worker_id = %(worker_id)s
"""

LIST_WORKERS = """
SELECT worker_id, host, pid, started_at_ms, heartbeat_at_ms, runs_held, stopped_at_ms
FROM workers WHERE stopped_at_ms IS NULL OR stopped_at_ms >= %(since)s
ORDER BY started_at_ms DESC LIMIT %(limit)s
"""

RUNS_HELD_BY = """
SELECT run_id FROM runs WHERE owner_id = %(owner_id)s AND status = 'running' ORDER BY run_id
"""
