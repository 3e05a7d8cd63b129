"""Where a task's attempts run (pure): ``[execution]`` in ``.tether/config.toml``, a workflow's
``execution=`` and a task's ``execution=``, merged field by field (the task's wins, then the
workflow's, then the config's), and the Ray task options they become.

```toml
[execution]
backend = "ray"                  # "in-process" (the default) or "ray"
address = "head.example:6379"    # the cluster (RAY_ADDRESS when unset; "auto": a local one)
num_cpus = 1                     # what every attempt asks of a Ray node (Ray's own default: 1)
resources = { claude = 1 }       # custom resources, e.g. at most N Claude sessions per host
scheduling_strategy = "SPREAD"   # or "DEFAULT" (pack)
runtime_env = { working_dir = "." }
```

In a workflow: ``Workflow(..., execution=Execution(backend="ray"))`` and
``@workflow.task(execution={"resources": {"claude": 1}})`` (an :class:`Execution` or a table
with the same keys). Ray's own retries are always off (``max_retries=0``,
``retry_exceptions=False``): Tether's retry policy decides, so nothing runs twice behind its
back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from store.errors import InvalidInputError

IN_PROCESS = "in-process"
RAY = "ray"
BACKENDS = (IN_PROCESS, RAY)
STRATEGIES = ("DEFAULT", "SPREAD")
_NUMBERS = ("num_cpus", "num_gpus")
_KEYS = ("backend", "num_cpus", "num_gpus", "memory_bytes", "resources", "runtime_env",
         "scheduling_strategy")


@dataclass(frozen=True)
class Execution:
    """Where a task's attempts run and what each asks of a Ray node; a field left None is
    inherited (task, then workflow, then ``[execution]``). ``memory_bytes`` is Ray's
    ``memory`` (bytes of RAM reserved on the node)."""

    backend: str | None = None
    num_cpus: float | None = None
    num_gpus: float | None = None
    memory_bytes: int | None = None
    resources: Mapping[str, float] | None = None
    runtime_env: Mapping[str, Any] | None = None
    scheduling_strategy: str | None = None

    def __post_init__(self) -> None:
        problem = execution_problem(self)
        if problem is not None:
            raise InvalidInputError(f"Execution settings: {problem}.")

    @property
    def on_ray(self) -> bool:
        """True when attempts go to a Ray cluster."""
        return self.backend == RAY


@dataclass(frozen=True)
class ExecutionConfig:
    """``[execution]`` of the config file: the cluster's address and the defaults."""

    address: str | None = None
    defaults: Execution = field(default_factory=Execution)

    @cached_property
    def resolved_defaults(self) -> Execution:
        """:attr:`defaults` with the backend filled in (in-process when unset): what a task
        with no settings of its own, in a workflow with none, runs with. Made once per
        config, not once per task (every dispatch asks)."""
        if self.defaults.backend is None:
            return replace(self.defaults, backend=IN_PROCESS)
        return self.defaults


def _number_ok(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def execution_problem(execution: Execution) -> str | None:
    """What is wrong with ``execution`` (a clause), or None."""
    if execution.backend is not None and execution.backend not in BACKENDS:
        return f"backend must be one of {', '.join(BACKENDS)}, not {execution.backend!r}"
    for key in _NUMBERS:
        value = getattr(execution, key)
        if value is not None and not _number_ok(value):
            return f"{key} must be a number >= 0, not {value!r}"
    memory = execution.memory_bytes
    if memory is not None and (
        not isinstance(memory, int) or isinstance(memory, bool) or memory < 0
    ):
        return f"memory_bytes must be a whole number of bytes >= 0, not {memory!r}"
    if execution.resources is not None:
        if not isinstance(execution.resources, Mapping):
            return "resources must be a table of resource names and amounts"
        for name, amount in execution.resources.items():
            if not isinstance(name, str) or not name or name in ("CPU", "GPU", "memory"):
                return (
                    f"resources names custom resources ({name!r} is not one; use num_cpus, "
                    "num_gpus or memory_bytes)"
                )
            if not _number_ok(amount):
                return f"resources.{name} must be a number >= 0, not {amount!r}"
    if execution.runtime_env is not None and not isinstance(execution.runtime_env, Mapping):
        return "runtime_env must be a table (Ray's runtime_env: working_dir, pip, container...)"
    strategy = execution.scheduling_strategy
    if strategy is not None and strategy not in STRATEGIES:
        return f"scheduling_strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}"
    return None


def execution_from(value: Any, where: str) -> Execution | None:
    """An :class:`Execution` from a workflow's or task's ``execution=`` (an Execution, a
    table with its keys, or None); InvalidInputError names ``where`` and the bad key."""
    if value is None or isinstance(value, Execution):
        return value
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}: execution must be an Execution or a table.")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise InvalidInputError(
            f"{where}: unknown execution setting {unknown[0]!r} (known: {', '.join(_KEYS)})."
        )
    try:
        return Execution(**dict(value))
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from None


def parse_execution(data: Any, source: str) -> ExecutionConfig:
    """``[execution]`` of config.toml; InvalidInputError names the bad key."""
    if data is None:
        return ExecutionConfig()
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{source}: [execution] must be a table.")
    table = dict(data)
    address = table.pop("address", None)
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise InvalidInputError(f"{source}: execution.address must be a cluster address text.")
    defaults = execution_from(table, f"{source}: [execution]") or Execution()
    return ExecutionConfig(address=address.strip() if address else None, defaults=defaults)


def resolve(
    config: ExecutionConfig, workflow: Execution | None, task: Execution | None
) -> Execution:
    """The settings a task's attempts run with: each field from the task, else the workflow,
    else ``[execution]``; the backend defaults to in-process."""
    chosen: dict[str, Any] = {}
    for layer in (workflow, task):
        if layer is not None:  # an empty layer (every task's default) adds nothing
            chosen.update((f.name, value) for f in fields(layer)
                          if (value := getattr(layer, f.name)) is not None)
    if not chosen:  # nothing set on the workflow or the task: most tasks, every dispatch
        return config.resolved_defaults
    merged = replace(config.defaults, **chosen)
    if merged.backend is None:
        merged = replace(merged, backend=IN_PROCESS)
    return merged


def ray_options(execution: Execution) -> dict[str, Any]:
    """The Ray task options of an attempt: what it asks of a node, and Ray's retries off."""
    options: dict[str, Any] = {"max_retries": 0, "retry_exceptions": False}
    if execution.num_cpus is not None:
        options["num_cpus"] = execution.num_cpus
    if execution.num_gpus is not None:
        options["num_gpus"] = execution.num_gpus
    if execution.memory_bytes is not None:
        options["memory"] = execution.memory_bytes
    if execution.resources:
        options["resources"] = dict(execution.resources)
    if execution.runtime_env:
        options["runtime_env"] = dict(execution.runtime_env)
    if execution.scheduling_strategy is not None:
        options["scheduling_strategy"] = execution.scheduling_strategy
    return options


def cluster_address(configured: str | None, environ: Mapping[str, str]) -> str:
    """The cluster to connect to: ``[execution] address``, else ``RAY_ADDRESS``, else
    ``auto`` (a cluster started on this host with ``ray start``)."""
    return configured or environ.get("RAY_ADDRESS", "").strip() or "auto"


def probe_target(address: str) -> tuple[str, int] | None:
    """The (host, port) to try before connecting, or None when the address names none
    (``auto``, ``local``). ``ray://h:p`` and ``h:p`` give (h, p)."""
    text = address.removeprefix("ray://").strip().rstrip("/")
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)
