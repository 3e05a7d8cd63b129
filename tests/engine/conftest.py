"""Fixtures of the engine tests: ``server``, the scripted model API server
(tests/sse_server.py)."""

from sse_server import server

__all__ = ["server"]
