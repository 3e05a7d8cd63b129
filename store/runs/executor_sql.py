"""SQL of where attempts ran and of the executor's nodes (written once; PostgreSQL renders it
with store/db/dialect.py)."""

PLACE_ATTEMPT = """
UPDATE attempts SET executor = :executor, host = :host, executor_node = :executor_node
WHERE run_id = :run_id AND node_id = :node_id AND iteration = :iteration AND attempt = :attempt
"""

SELECT_EXECUTOR_NODE = "SELECT * FROM executor_nodes WHERE node_id = ?"

# A node seen again keeps when it was first seen; one seen alive again is no longer lost.
UPSERT_EXECUTOR_NODE = """
INSERT INTO executor_nodes (node_id, executor, host, address, alive, resources_json,
                            available_json, first_seen_ms, updated_at_ms, lost_at_ms)
VALUES (:node_id, :executor, :host, :address, :alive, :resources_json, :available_json,
        :now, :now, CASE WHEN :alive = 1 THEN NULL ELSE :now END)
ON CONFLICT (node_id) DO UPDATE SET
    executor = excluded.executor, host = excluded.host, address = excluded.address,
    alive = excluded.alive, resources_json = excluded.resources_json,
    available_json = excluded.available_json, updated_at_ms = excluded.updated_at_ms,
    lost_at_ms = CASE WHEN excluded.alive = 1 THEN NULL
                      ELSE coalesce(executor_nodes.lost_at_ms, excluded.updated_at_ms) END
"""

# Alive nodes first, then the lost ones most recently seen first.
SELECT_EXECUTOR_NODES = """
SELECT * FROM executor_nodes ORDER BY alive DESC, updated_at_ms DESC, host, node_id LIMIT ?
"""
