"""SQL text for the dispatch guard: the few run columns it needs, read at every dispatch.

Executed by :mod:`store.runs.dispatch_guard`. Narrower than ``SELECT *`` on purpose: the guard runs
before every attempt, and decoding a run's input and output JSON each time would be wasted work.
"""

from __future__ import annotations

DISPATCH_STATE = """
SELECT clear_requested_at_ms, clear_reason, generation,
       input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens
FROM runs WHERE run_id = ?
"""
