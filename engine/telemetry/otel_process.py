"""The export process: the live export (:mod:`engine.telemetry.otel_live`) runs in a process of
its own beside the engine's, so reading, mapping, encoding and sending never take the engine's
interpreter lock, and a collector that is down, slow or failing never reaches a run.

The engine's process starts it when its first engine opens on a workspace with export on
(:func:`attach`) and talks to it over a pipe: the settings and each engine's owner id go in,
one JSON line each (never on the command line, which every user can read); the export's state
and warnings come back, one JSON line each, and feed :mod:`engine.telemetry.otel_status` (the
dashboard's seam). Closing the pipe asks it to send what is left and end; the engine's process
waits for that at most ``shutdown_timeout_s``. If the engine's process is killed, the pipe
closes just the same.

``python -m engine.telemetry.otel_process`` is the export process itself.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from engine.telemetry.otel_semconv import AgentKind, agent_kinds
from engine.telemetry.otel_settings import ExportTarget, TelemetrySettings, resolve_target
from engine.telemetry.otel_status import (
    ExportSnapshot,
    ExportStatus,
    register,
    report,
    unregister,
    workspace_key,
)
from store.workspace.layout import Workspace

STATUS_EVERY_S = 0.2
"""How often the export process says how it is going (when something changed)."""


class ExportProcess:
    """The engine's side of one export process."""

    def __init__(self, workspace: Workspace, target: ExportTarget,
                 kinds: Mapping[str, AgentKind]) -> None:
        from engine.telemetry.otel_sdk import check_installed

        check_installed(target)
        self.target = target
        self.status = ExportStatus(
            target.shown, target.protocol, metrics_endpoint=target.metrics_shown
        )
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "engine.telemetry.otel_process"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, start_new_session=True,
        )
        assert self._process.stdin is not None
        self._send({
            "workspace": str(workspace.root),
            "database_url": workspace.database_url,
            "target": dataclasses.asdict(target),
            "kinds": {name: list(kind) for name, kind in kinds.items()},
            "since_ms": int(time.time() * 1000) - 1000,
        })
        self._stopping = False
        self._reader = threading.Thread(target=self._read, name="tether-otlp-status",
                                        daemon=True)
        self._reader.start()

    def _send(self, message: Mapping[str, Any]) -> None:
        with self._lock:
            stdin = self._process.stdin
            if stdin is None or stdin.closed:
                return
            try:
                stdin.write(json.dumps(message) + "\n")
                stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # it ended; the reader says why

    def add_owner(self, owner_id: str) -> None:
        """Export the runs of the engine with this owner id too (from a moment before now on:
        the export may read past this engine's first events before it hears of it)."""
        self._send({"owner": owner_id, "since_ms": int(time.time() * 1000) - 1000})

    def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for line in stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "status" in message:
                self.status.replace(ExportSnapshot(**message["status"]))
            elif "warn" in message:
                report(str(message["warn"]))
        self._process.wait()
        if not self._stopping:
            error = (self._process.stderr.read() if self._process.stderr else "").strip()
            last = error.splitlines()[-1] if error else f"exit code {self._process.returncode}"
            self.status.unavailable(f"the export process ended: {last}")
            report(f"telemetry: the export process ended ({last}); runs go on without export.")

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask the export process to send what is left and end; wait at most ``timeout_s``
        (default: the target's ``shutdown_timeout_s``, plus a moment to start up)."""
        budget = self.target.shutdown_timeout_s if timeout_s is None else timeout_s
        self._stopping = True
        with self._lock:
            if self._process.stdin is not None:
                try:
                    self._process.stdin.close()
                except OSError:
                    pass
        self._reader.join(budget + 2.0)
        if self._reader.is_alive():  # it is still sending: leave it to its own deadline
            return
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()


# -- one export per workspace per process ---------------------------------------------------------

_EXPORTS: dict[str, ExportProcess] = {}
_LOCK = threading.Lock()
_at_exit: list[bool] = []


def attach(
    workspace: Workspace,
    settings: TelemetrySettings | None,
    owner_id: str,
    agents: Mapping[str, Mapping[str, Any]],
    environ: Mapping[str, str] | None = None,
) -> ExportProcess | None:
    """Export the runs of engine ``owner_id`` when telemetry is configured (None otherwise,
    and when the packages are missing: that is said once, and runs go on without export)."""
    from engine.telemetry.otel_sdk import TelemetryUnavailable

    target = resolve_target(settings, os.environ if environ is None else environ)
    if target is None:
        return None
    key = workspace_key(workspace)
    with _LOCK:
        export = _EXPORTS.get(key)
        if export is None:
            try:
                export = ExportProcess(workspace, target, agent_kinds(agents))
            except TelemetryUnavailable as missing:
                report(f"{missing} Runs go on without export.")
                return None
            except OSError as error:
                report(f"telemetry export is off: it cannot start ({error}).")
                return None
            _EXPORTS[key] = export
            register(key, export.status)
            if not _at_exit:
                _at_exit.append(True)
                atexit.register(stop_all)
        export.add_owner(owner_id)
        return export


def stop_all(timeout_s: float | None = None) -> None:
    """Stop every export of this process, each sending what is left within its
    ``shutdown_timeout_s`` (or ``timeout_s``)."""
    with _LOCK:
        exports = list(_EXPORTS.items())
        _EXPORTS.clear()
    for key, export in exports:
        export.stop(timeout_s)
        unregister(key)


# -- the export process itself --------------------------------------------------------------------


def _serve(stdin: IO[str], stdout: IO[str]) -> None:
    from engine.telemetry import otel_status
    from engine.telemetry.otel_live import LiveExport
    from engine.telemetry.otel_sdk import TelemetryUnavailable

    write_lock = threading.Lock()

    def say(message: Mapping[str, Any]) -> None:
        with write_lock:
            try:
                stdout.write(json.dumps(message) + "\n")
                stdout.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the engine's process is gone: nobody to tell

    otel_status.set_sink(lambda text: say({"warn": text}))
    first = stdin.readline()
    if not first:
        return
    settings = json.loads(first)
    workspace = Workspace(Path(settings["workspace"]), database_url=settings["database_url"])
    target = ExportTarget(**settings["target"])
    kinds = {name: AgentKind(*kind) for name, kind in settings["kinds"].items()}
    try:
        live = LiveExport(workspace, target, kinds, settings["since_ms"])
    except TelemetryUnavailable as missing:
        say({"warn": f"{missing} Runs go on without export."})
        return
    ended = threading.Event()

    def listen() -> None:
        for line in stdin:
            message = json.loads(line)
            owner = message.get("owner")
            if owner:
                since = message.get("since_ms")
                live.add_owner(str(owner), int(since) if since is not None else None)
        ended.set()

    threading.Thread(target=listen, name="tether-otlp-owners", daemon=True).start()
    shown = None
    while not ended.wait(STATUS_EVERY_S):
        state = live.status.snapshot()
        if state != shown:
            shown = state
            say({"status": dataclasses.asdict(state)})
    live.stop()
    say({"status": dataclasses.asdict(live.status.snapshot())})


def main() -> None:
    """The export process: settings and owner ids on stdin, state and warnings on stdout.
    It runs at a lower CPU priority: on a busy machine the engine's process goes first."""
    try:
        os.nice(10)
    except (AttributeError, OSError):
        pass
    try:
        _serve(sys.stdin, sys.stdout)
    except Exception as error:  # said on stderr, which the engine's process reads at the end
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
