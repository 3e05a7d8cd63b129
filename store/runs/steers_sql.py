"""SQL text for steers (``steers``). Executed by :mod:`store.runs.steer_log`."""

from __future__ import annotations

INSERT_STEER = """
INSERT INTO steers (steer_id, run_id, node_id, iteration, position, message, sent_by, state,
                    created_at_ms, deliver)
VALUES (:steer_id, :run_id, :node_id, :iteration,
        (SELECT count(*) FROM steers WHERE run_id = :run_id), :message, :sent_by, 'queued', :now,
        :deliver)
"""
DECIDE_STEER = """
UPDATE steers SET state = :state, decided_at_ms = :now, attempt = :attempt, refusal = :refusal
WHERE steer_id = :steer_id AND state = 'queued'
"""
# A steer an attempt's start took back to queued: the attempt's agent never ran.
RETURN_STEER = """
UPDATE steers SET state = 'queued', decided_at_ms = NULL, attempt = NULL
WHERE steer_id = :steer_id AND state = 'delivered' AND attempt = :attempt
"""
# What a running attempt reads (deliver = 'now'); a steer for the next attempt waits for it.
QUEUED_FOR_NODE = """
SELECT * FROM steers WHERE run_id = ? AND node_id = ? AND iteration = ? AND state = 'queued'
AND deliver = 'now' ORDER BY position
"""
QUEUED_NEXT_ATTEMPT = """
SELECT * FROM steers WHERE run_id = ? AND node_id = ? AND iteration = ? AND state = 'queued'
AND deliver = 'next-attempt' ORDER BY position
"""
# What a run's watch polls: every queued steer of the run, for now and for the next attempt.
QUEUED_OF_RUN = """
SELECT s.*, n.state AS node_state, n.attempts AS node_attempts FROM steers s
LEFT JOIN nodes n ON n.run_id = s.run_id AND n.node_id = s.node_id AND n.iteration = s.iteration
WHERE s.run_id = ? AND s.state = 'queued' ORDER BY s.position
"""
STEERS_OF_RUN = "SELECT * FROM steers WHERE run_id = ? ORDER BY position"
NODE_STATE = "SELECT state FROM nodes WHERE run_id = ? AND node_id = ? AND iteration = ?"
