"""Workflows, scheduler, agents, memory runtime, caching, ceilings, handoff and metering.

Depends on ``store``; knows nothing of ``tui``.
"""
