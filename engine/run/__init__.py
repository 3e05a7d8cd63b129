"""Executing runs: the engine, the scheduling loop of one run and its parts, the task cache
steps, how a run ends, the standard wiring of an engine for a workspace, and ``tether worker``.

:mod:`engine.run.engine` starts and resumes runs; :mod:`engine.run.scheduled_run` is the loop
of one run over :mod:`engine.run.execution` (the state every part of a run works on);
:mod:`engine.run.wiring` opens an engine with the workspace's config and the standard hooks.
"""
