"""The Workflow API a workflow author writes: the definition, its tasks and policies, what a
prompt function sees, loading a workflow file and the dry render before a run.

* :mod:`engine.workflow.definition` — :class:`Workflow` and loops, checked when defined;
* :mod:`engine.workflow.task_spec` — one declared task;
* :mod:`engine.workflow.policies` — :class:`Backoff` and :class:`CachePolicy`;
* :mod:`engine.workflow.context` — :class:`TaskContext`, what a prompt function receives;
* :mod:`engine.workflow.definition_error` — the one error a definition raises;
* :mod:`engine.workflow.loader` — a workflow from a Python file;
* :mod:`engine.workflow.root_prompts` — root prompts rendered once before a run starts.

Authors import these names from :mod:`engine`.
"""
