"""Executors: where an attempt's agent runs. In the orchestrating process (the default), or as
a Ray task on a cluster (:mod:`engine.executors.ray_agent`), with the orchestrator as the only
writer of the run's records.

* :mod:`engine.executors.settings` — ``[execution]`` in ``config.toml``, a workflow's or a
  task's :class:`Execution`, merged into one placement per task (pure);
* :mod:`engine.executors.executors` — the engine's executors: in-process, or the Ray cluster
  (connected once per process);
* :mod:`engine.executors.remote_events` — what a remote attempt streams back (pure);
* :mod:`engine.executors.ray_runner` — the side that runs on a Ray worker;
* :mod:`engine.executors.ray_agent` — the orchestrator's side: submit, record, cancel;
* :mod:`engine.executors.ray_cluster` — connecting, the cluster's nodes, the reaper;
* :mod:`engine.executors.ray_faults` — Ray's failures as attempt failures (pure);
* :mod:`engine.executors.reaper` — stopping what a dead orchestrator's attempts left running.
"""
