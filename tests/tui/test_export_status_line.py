"""The dashboard's status line says when export is on and whether it is failing (the real
Textual app under Pilot, reading the exporter's state through its seam)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from engine.telemetry import otel_status
from engine.telemetry.otel_status import ExportStatus
from tools.otlp_receiver import HttpReceiver
from tui.widgets.status import StatusLine


@pytest.fixture()
def receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as running:
        yield running


def _line(app) -> str:
    return str(app.screen.query_one(StatusLine).render())


async def test_no_word_about_export_when_it_is_off(make_app):
    app = make_app()
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.pause()
        assert "OTLP" not in _line(app)


def _configure(workspace, endpoint: str) -> None:
    (workspace.root / "config.toml").write_text(f'[telemetry]\nendpoint = "{endpoint}"\n')


async def _checked(app, pilot) -> str:
    await app.export_status.check()
    app.screen.update_chrome()
    await pilot.pause()
    return _line(app)


async def test_export_on_then_failing_then_back(make_app, sample_workspace, receiver):
    _configure(sample_workspace, receiver.endpoint)
    app = make_app()
    key = otel_status.workspace_key(sample_workspace)
    async with app.run_test(size=(200, 40)) as pilot:
        await _checked(app, pilot)
        app.refresh_bindings()
        await app.refresh_screen(app.live_screen())
        await pilot.pause()
        assert "OTLP on" in _line(app)  # configured, nothing sent from here yet
        status = ExportStatus("http://127.0.0.1:4318/v1/traces", "http/protobuf")
        otel_status.register(key, status)
        try:
            # What the export's own thread does when the collector answers 500.
            failing = threading.Thread(target=status.failed, args=(12, "HTTP 500 Internal"))
            failing.start()
            failing.join()
            await pilot.pause()
            app.screen.update_chrome()
            await pilot.pause()
            line = _line(app)
            assert "⚠ OTLP failing: HTTP 500 Internal · 12 spans lost" in line
            said = [n.message for n in app._notifications]
            assert any("cannot send spans" in text for text in said), said
            status.sent(30, 0)
            app.screen.update_chrome()
            await pilot.pause()
            assert "OTLP on 30 spans sent · 12 spans lost" in _line(app)
        finally:
            otel_status.unregister(key)


async def test_a_bad_telemetry_table_is_said_on_the_line(make_app, sample_workspace):
    (sample_workspace.root / "config.toml").write_text('[telemetry]\nendpoint = "nowhere"\n')
    app = make_app()
    async with app.run_test(size=(220, 40)) as pilot:
        await pilot.pause()
        assert "⚠ OTLP off:" in _line(app) and "telemetry.endpoint" in _line(app)


async def test_the_dashboard_asks_the_collector_for_runs_exported_elsewhere(
        make_app, sample_workspace, receiver):
    """No export in the dashboard's process: the line says what the collector answers to the
    dashboard's own empty export request (as it would to another process's exporter)."""
    _configure(sample_workspace, receiver.endpoint)
    app = make_app()
    async with app.run_test(size=(200, 40)) as pilot:
        assert "OTLP on" in await _checked(app, pilot)
        receiver.mode = "fail"
        assert "⚠ OTLP failing: HTTP 500" in await _checked(app, pilot)
        receiver.mode = "ok"
        assert "⚠" not in await _checked(app, pilot)
    assert receiver.requests >= 3 and receiver.spans() == []  # empty requests, no spans


async def test_a_collector_that_is_down_is_said_on_the_line(make_app, sample_workspace):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    _configure(sample_workspace, f"http://127.0.0.1:{port}")
    app = make_app()
    async with app.run_test(size=(200, 40)) as pilot:
        assert "⚠ OTLP failing: connection refused" in await _checked(app, pilot)


def test_the_target_is_the_engine_configs_with_or_without_a_config_file(
    tmp_path, monkeypatch
) -> None:
    """The quick answer for a workspace with no config (export off) is the full reading's."""
    import os

    from engine.run.engine_config import load_config
    from engine.telemetry.otel_settings import resolve_target
    from store.errors import TetherError
    from store.workspace.layout import Workspace
    from tui.widgets.export_status import configured_target

    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    workspace = Workspace(tmp_path)

    def full() -> object:
        return resolve_target(load_config(workspace.config_path).telemetry, os.environ)

    assert configured_target(workspace) is None and full() is None  # no file
    workspace.config_path.write_text("# nothing set\n")
    assert configured_target(workspace) is None and full() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert configured_target(workspace) == full() is not None  # a variable turns it on
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    workspace.config_path.write_text('[telemetry]\nendpoint = "http://127.0.0.1:4318"\n')
    assert configured_target(workspace) == full() is not None
    workspace.config_path.write_text("[engine]\nconcurrency = 'many'\n")
    with pytest.raises(TetherError) as quick:
        configured_target(workspace)
    with pytest.raises(TetherError) as whole:
        full()
    assert str(quick.value) == str(whole.value)  # a bad file is said the same way
