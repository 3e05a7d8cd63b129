"""Where attempts run: [execution], a workflow's and a task's settings, merged (pure), and the
Ray task options they become (Ray's own retries always off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.executors.settings import (
    Execution,
    ExecutionConfig,
    cluster_address,
    execution_from,
    parse_execution,
    probe_target,
    ray_options,
    resolve,
)
from engine.run.engine_config import load_config
from engine.workflow.definition import Workflow
from engine.workflow.definition_error import WorkflowDefinitionError
from store.errors import InvalidInputError


def test_in_process_is_the_default_and_ray_retries_are_always_off() -> None:
    assert resolve(ExecutionConfig(), None, None).backend == "in-process"
    assert not resolve(ExecutionConfig(), None, None).on_ray
    options = ray_options(Execution(backend="ray"))
    assert options == {"max_retries": 0, "retry_exceptions": False}


def test_task_wins_over_workflow_over_config_field_by_field() -> None:
    config = ExecutionConfig(
        address="h:6379",
        defaults=Execution(backend="ray", num_cpus=2, scheduling_strategy="SPREAD"),
    )
    workflow = Execution(resources={"claude": 1}, num_cpus=1)
    task = Execution(num_cpus=0, runtime_env={"working_dir": "."})
    merged = resolve(config, workflow, task)
    assert merged == Execution(
        backend="ray",
        num_cpus=0,
        resources={"claude": 1},
        runtime_env={"working_dir": "."},
        scheduling_strategy="SPREAD",
    )
    assert ray_options(merged) == {
        "max_retries": 0,
        "retry_exceptions": False,
        "num_cpus": 0,
        "resources": {"claude": 1},
        "runtime_env": {"working_dir": "."},
        "scheduling_strategy": "SPREAD",
    }
    # A task can keep itself on the orchestrator inside a Ray workflow.
    assert not resolve(config, workflow, Execution(backend="in-process")).on_ray


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"backend": "k8s"}, "backend must be one of in-process, ray"),
        ({"num_cpus": -1}, "num_cpus must be a number >= 0"),
        ({"num_gpus": True}, "num_gpus must be a number >= 0"),
        ({"memory_bytes": 1.5}, "memory_bytes must be a whole number"),
        ({"resources": {"CPU": 1}}, "use num_cpus, num_gpus or memory_bytes"),
        ({"resources": {"claude": "one"}}, "resources.claude must be a number"),
        ({"resources": [1]}, "resources must be a table"),
        ({"runtime_env": "."}, "runtime_env must be a table"),
        ({"scheduling_strategy": "PACK"}, "scheduling_strategy must be one of DEFAULT, SPREAD"),
        ({"cpus": 1}, "unknown execution setting 'cpus'"),
    ],
)
def test_bad_settings_are_one_sentence(table: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidInputError, match=words):
        execution_from(table, "Task 'x'")


def test_config_file_execution_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[execution]\nbackend = "ray"\naddress = " 10.0.0.5:6379 "\n'
        'resources = { claude = 1 }\n'
    )
    config = load_config(path).execution
    assert config.address == "10.0.0.5:6379"
    assert config.defaults == Execution(backend="ray", resources={"claude": 1})
    path.write_text('[execution]\naddress = 7\n')
    with pytest.raises(InvalidInputError, match="execution.address must be"):
        load_config(path)
    path.write_text('[execution]\nbackend = "slurm"\n')
    with pytest.raises(InvalidInputError, match=r"config.toml: \[execution\].*backend"):
        load_config(path)
    assert parse_execution(None, "x") == ExecutionConfig()


def test_workflow_and_task_settings_are_definition_errors() -> None:
    workflow = Workflow("w", execution={"backend": "ray"})
    assert workflow.execution == Execution(backend="ray")

    @workflow.task(execution=Execution(resources={"claude": 1}))
    def a(ctx: object) -> str:
        return "a"

    assert a.execution == Execution(resources={"claude": 1})
    with pytest.raises(WorkflowDefinitionError, match="Task 'b'.*num_cpus"):
        workflow.add_task("b", "prompt", execution={"num_cpus": "lots"})
    with pytest.raises(WorkflowDefinitionError, match="Workflow 'v'"):
        Workflow("v", execution={"bogus": 1})


def test_cluster_address_and_probe_target() -> None:
    assert cluster_address("h:1", {"RAY_ADDRESS": "e:2"}) == "h:1"
    assert cluster_address(None, {"RAY_ADDRESS": " e:2 "}) == "e:2"
    assert cluster_address(None, {}) == "auto"
    assert probe_target("ray://head:10001") == ("head", 10001)
    assert probe_target("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert probe_target("[::1]:6379") == ("::1", 6379)
    assert probe_target("auto") is None
    assert probe_target("head") is None
