"""Task-output cache policy as pure functions: the cache key and the freshness rule.

Unlike the reference (whose key left out the prompt text and the iteration, so a changed prompt
could return a stale answer), the key here includes by default the rendered task prompt, the
run input and the iteration, plus the scope identity, the output schema, the agent name and the
policy's version and key function value. Turn ``include_prompt``/``include_input`` off on the
:class:`~engine.workflow.policies.CachePolicy` to share entries across prompts or inputs on
purpose.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def cache_key(
    *,
    scope: str,
    workflow: str,
    run_id: str,
    node_id: str,
    iteration: int,
    agent: str,
    output_schema: dict[str, Any] | None,
    version: str | int | None = None,
    key_value: Any = None,
    prompt: str | None = None,
    input: Any = None,
) -> str:
    """SHA-256 hex key for a task output. ``run`` scope adds the run id, ``workflow`` scope the
    workflow name, ``global`` neither. ``prompt``/``input`` None means "not part of the key"."""
    identity: dict[str, Any] = {"scope": scope, "node": node_id, "iteration": iteration}
    if scope in ("run", "workflow"):
        identity["workflow"] = workflow
    if scope == "run":
        identity["run"] = run_id
    material = {
        **identity,
        "agent": agent,
        "schema": output_schema,
        "version": version,
        "key": key_value,
        "prompt": prompt,
        "input": input,
    }
    return hashlib.sha256(_canonical(material).encode("utf-8")).hexdigest()


def is_fresh(created_at_ms: int, ttl_ms: int | None, now_ms: int) -> bool:
    """True when an entry may be used: no TTL, or younger than the TTL (an entry exactly
    ``ttl_ms`` old is expired)."""
    if ttl_ms is None:
        return True
    return now_ms - created_at_ms < ttl_ms
