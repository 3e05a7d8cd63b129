"""``tether export otlp`` and the start-up costs of export, as a person meets them: real
processes, a real receiver, one sentence for every refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from otel_support import PATIENT_SHUTDOWN, ROOT, otel_env, tether

from tools.otlp_receiver import HttpReceiver, latest

TINY = Path(__file__).with_name("tiny_workflow.py")
REVIEW = ("run", str(TINY))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run exported live, then back-filled to a second receiver."""
    workspace = tmp_path_factory.mktemp("otel-cli") / "ws"
    workspace.mkdir()
    (workspace / "config.toml").write_text(PATIENT_SHUTDOWN)
    with HttpReceiver() as live:
        done = tether(ROOT, otel_env(live.endpoint), *REVIEW, "--workspace", str(workspace))
        assert done.returncode == 0, done.stderr
    with HttpReceiver() as again:
        back = tether(ROOT, otel_env(None), "export", "otlp", "--endpoint", again.endpoint,
                      "--format", "json", "--workspace", str(workspace))
        assert back.returncode == 0, back.stderr
    return {"workspace": workspace, "live": live, "again": again,
            "document": json.loads(back.stdout)}


def test_a_back_fill_sends_the_very_spans_the_live_export_sent(exported):
    live, again = exported["live"].spans(), exported["again"].spans()
    assert len(live) >= 3
    key = ("trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "attributes")
    assert sorted(tuple(str(s[k]) for k in key) for s in live) == sorted(
        tuple(str(s[k]) for k in key) for s in again)
    document = exported["document"]
    assert (document["runs"], document["spans"], document["complete"]) == (1, len(live), True)
    for name in ("gen_ai.client.token.usage", "tether.tokens.context_window_per_call"):
        sums = [sorted(p["sum"] for p in latest(r.metric_points()[name]))
                for r in (exported["live"], exported["again"])]
        assert sums[0] == sums[1]


def test_since_and_run_choose_runs(exported):
    workspace = str(exported["workspace"])
    with HttpReceiver() as receiver:
        future = tether(ROOT, otel_env(receiver.endpoint), "export", "otlp", "--since",
                        "2999-01-01", "--workspace", workspace, "--format", "json")
        assert future.returncode == 0, future.stderr
        assert json.loads(future.stdout)["runs"] == 0 and receiver.spans() == []
        recent = tether(ROOT, otel_env(receiver.endpoint), "export", "otlp", "--since", "1h",
                        "--no-metrics", "--workspace", workspace)
        assert recent.returncode == 0, recent.stderr
        assert "spans (1 of 1 run)" in recent.stdout and "measurements" not in recent.stdout
        assert receiver.metric_points() == {}


@pytest.mark.parametrize("args, code, words", [
    (["--run", "r-000000000000"], 1, "There is no run"),
    (["--run", "not a run id"], 2, "run id"),
    (["--since", "yesterday"], 2, "--since takes an age"),
    (["--since", "1h", "--run", "r-000000000000"], 2, "give one of them"),
    (["--endpoint", "collector:4318"], 2, "--endpoint"),
])
def test_bad_input_is_one_sentence_and_sends_nothing(exported, args, code, words):
    with HttpReceiver() as receiver:
        if "--endpoint" not in args:
            args = [*args, "--endpoint", receiver.endpoint]
        done = tether(ROOT, otel_env(None), "export", "otlp", *args,
                      "--workspace", str(exported["workspace"]))
        assert receiver.requests == 0
    assert done.returncode == code, done.stderr
    assert words in done.stderr and done.stderr.count("\n") == 1


def test_without_a_collector_it_says_how_to_name_one(exported):
    done = tether(ROOT, otel_env(None), "export", "otlp", "--workspace", str(exported["workspace"]))
    assert done.returncode == 2 and "No collector is configured" in done.stderr
    # Bad input is said first, whatever else is missing.
    done = tether(ROOT, otel_env(None), "export", "otlp", "--since", "banana",
                  "--workspace", str(exported["workspace"]))
    assert done.returncode == 2 and "not 'banana'" in done.stderr


def test_a_refusing_collector_is_exit_3_with_its_answer(exported):
    with HttpReceiver() as receiver:
        receiver.mode = "fail"
        done = tether(ROOT, otel_env(receiver.endpoint), "export", "otlp",
                      "--workspace", str(exported["workspace"]))
    assert done.returncode == 3
    assert "did not take everything (HTTP 500" in done.stderr and "0 spans went out" in done.stderr
    assert "Sent" not in done.stdout  # no line that reads like success


HINT = "pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http"


def _shadowed(tmp_path: Path) -> dict[str, str]:
    """An environment where the OpenTelemetry packages cannot be found (a plain package named
    ``opentelemetry`` hides the installed ones)."""
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    return {"PYTHONPATH": os.pathsep.join([str(shadow.parent), str(ROOT)])}


def test_without_the_extra_export_is_one_sentence_and_runs_go_on(exported, tmp_path):
    env = otel_env("http://127.0.0.1:9", **_shadowed(tmp_path))
    back = tether(ROOT, env, "export", "otlp", "--workspace", str(exported["workspace"]))
    assert back.returncode == 2
    assert HINT in back.stderr and back.stderr.count("\n") == 1
    run = tether(ROOT, env, *REVIEW, "--workspace", str(tmp_path / "ws"))
    assert run.returncode == 0, run.stderr
    assert run.stderr.count(HINT) == 1
    assert "Runs go on without export." in run.stderr


PROBE = """
import json, sys
from tui.cli.entry import main
sys.argv = ["tether", *json.loads(sys.argv[1])]
try:
    main(fast_exit=False)
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"opentelemetry", "grpc"})),
      file=sys.stderr)
"""


def test_a_run_without_export_imports_no_opentelemetry(tmp_path):
    argv = json.dumps([*REVIEW, "--workspace", str(tmp_path / "ws")])
    found = {}
    for label, endpoint in (("off", None), ("on", "http://127.0.0.1:9")):
        env = otel_env(endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="200",
                       PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", PROBE, argv], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        found[label] = next(json.loads(line) for line in done.stderr.splitlines()
                            if line.startswith("["))
    assert found == {"off": [], "on": ["opentelemetry"]}  # the probe does see it when on
