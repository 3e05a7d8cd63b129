"""PostgreSQL twin of :mod:`store.runs.guard_sql`."""

from __future__ import annotations

DISPATCH_STATE = """
SELECT clear_requested_at_ms, clear_reason, generation,
       input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens
FROM runs WHERE run_id = %s
"""
