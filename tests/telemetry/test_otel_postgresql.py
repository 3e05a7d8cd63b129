"""The export on a team workspace in PostgreSQL: a run exported live as it records, then the
same spans back-filled from the database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from otel_support import ROOT, otel_env, tether
from pg_support import fresh_schema

from store.workspace.layout import DATABASE_URL_ENV_VAR
from tools.otlp_receiver import HttpReceiver

pytestmark = pytest.mark.postgresql
TINY = Path(__file__).with_name("tiny_workflow.py")


@pytest.fixture
def team_url() -> Iterator[str]:
    with fresh_schema("otel") as url:
        yield url


def test_live_and_back_filled_spans_are_the_same_on_postgresql(team_url: str) -> None:
    with HttpReceiver() as live:
        env = otel_env(live.endpoint, **{DATABASE_URL_ENV_VAR: team_url})
        done = tether(ROOT, env, "run", str(TINY))
        assert done.returncode == 0, done.stderr
    with HttpReceiver() as again:
        back = tether(ROOT, otel_env(again.endpoint, **{DATABASE_URL_ENV_VAR: team_url}),
                      "export", "otlp")
        assert back.returncode == 0, back.stderr
    names = sorted(s["name"] for s in live.spans())
    assert names == ["chat sim-1", "chat sim-1", "invoke_agent check", "invoke_agent plan",
                     "invoke_workflow tiny"]
    assert sorted(s["span_id"] for s in live.spans()) == sorted(
        s["span_id"] for s in again.spans())
