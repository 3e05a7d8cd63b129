"""Agents: what every agent implements (:mod:`engine.agents.agent`, with the tools it may be
offered in :mod:`engine.agents.agent_tool`), building them by name
(:mod:`engine.agents.registry`), the offline :mod:`engine.agents.simulated` agent, and what all
agents share: failure kinds (:mod:`engine.agents.failures`) and checks of reported token counts
(:mod:`engine.agents.reported_usage`). Agent CLIs run as subprocesses live in
:mod:`engine.agents.cli`, HTTP agents in :mod:`engine.agents.http`.
"""
