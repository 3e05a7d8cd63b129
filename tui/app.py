"""The Tether dashboard: a Textual app that tails the workspace database and artifacts.

Views (modes): ``1`` Runs, ``2`` Tokens, ``3`` Memory, ``4`` Handoffs, ``5`` Usage. One async
worker polls (:class:`tui.tailing.WorkspaceTailer`) whenever the workspace folder reports a
write, and on a slow timer in case it does not; each poll that finds a commit refreshes the
view on screen with bounded queries. ``p`` pauses the screen, not the collection: polls
continue and count what they hold back.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.screen import ModalScreen, Screen

from store.clock import SYSTEM_CLOCK, Clock
from store.db.storage_errors import storage_error
from store.errors import DatabaseUnavailable, TetherError
from store.model.run_records import RunRecord
from store.read.dashboard_reader import DashboardReader
from store.workspace.layout import Workspace
from tui.clear_follow import ClearFollowUps
from tui.commands import RunsProvider
from tui.screens import views
from tui.screens.live_screen import LiveScreen
from tui.status_line import status_line
from tui.tailing import Batch, WorkspaceTailer
from tui.widgets.export_status import ExportStatusPiece

TICK_S = 1.0
"""How often the status line and time-dependent cells (elapsed, stale) are redrawn."""
HISTORY_DEPTH = 20
"""How many earlier views escape can walk back through."""
WARM_GAP_S = 0.05
"""Pause before building each unvisited view in the background (input is handled first)."""
WARM_AFTER_S = 0.2
"""How long after the first frame the other views start being built."""


def read_problem(error: BaseException, workspace: Workspace) -> str:
    """The status line's sentence for a failed read (a damaged file is named as such)."""
    if isinstance(error, TetherError):
        return str(error)
    problem = storage_error(error, workspace.database_path)
    if problem is not None:
        return str(problem)
    return f"reading the workspace failed: {error}; retrying"


class TetherApp(App[None]):
    """The dashboard. ``engine`` is the embedded engine when the app runs one (``tether demo``)."""

    TITLE = "Tether"
    CSS_PATH = "app.tcss"
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {
        "runs": views.runs_view,
        "tokens": views.tokens_view,
        "memory": views.memory_view,
        "handoffs": views.handoffs_view,
        "usage": views.usage_view,
    }
    DEFAULT_MODE = "runs"
    COMMANDS = App.COMMANDS | {RunsProvider}
    # The view keys are on the tab line at the top; the footer keeps its width for the rest.
    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("1", "show_view('runs')", "Runs", show=False),
        Binding("2", "show_view('tokens')", "Tokens", show=False),
        Binding("3", "show_view('memory')", "Memory", show=False),
        Binding("4", "show_view('handoffs')", "Handoffs", show=False),
        Binding("5", "show_view('usage')", "Usage", show=False),
        Binding("p", "toggle_pause", "Pause"),
        Binding("q", "request_quit", "Quit"),
    ]

    def __init__(
        self,
        workspace: Workspace,
        *,
        clock: Clock = SYSTEM_CLOCK,
        poll_interval: float = 0.5,
        watch: bool = True,
        engine: Any = None,
        after_apply: Callable[[Batch], None] | None = None,
        background: Sequence[Callable[[TetherApp], Awaitable[Any]]] = (),
    ) -> None:
        super().__init__()
        self.workspace = workspace
        self.clock = clock
        self.poll_interval = poll_interval
        self.watch_files = watch
        self.engine = engine
        """The embedded engine (``tether demo``), or None when only watching."""
        self.after_apply = after_apply
        """Called after the screen has been repainted with a batch (benchmarks use it)."""
        self._background = list(background)
        """Coroutines started as workers once the app runs (the demo's embedded engine)."""
        self.tailer = WorkspaceTailer(workspace, ring=self.bell,
                                      say=lambda text: self.notify(text, markup=False))
        self.export_status = ExportStatusPiece(workspace)
        self.filters: dict[str, str] = {}
        self.paused = False
        self.held_events = 0
        self.checked_at_ms: int | None = None
        self.read_problem: str | None = None
        """The last read error (cleared by the next successful poll)."""
        self.changed_at_ms: int | None = None
        self.commits = 0
        """How many polls found a commit: a view shown again with none since it last read
        shows what it holds instead of reading it all again (LiveScreen.read_inputs)."""
        self.known_runs: dict[str, RunRecord] = {}
        self.selected_run_id: str | None = None
        self.selected_node_id: str | None = None
        self.token_scope = "workspace"
        self.highlight_terms: tuple[str, ...] = ()
        self.history: list[str] = []
        """Views shown before the current one (escape goes back through them)."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._warm_started = False

    # -- crashes --------------------------------------------------------------------------------

    crash_to_file = False
    """Set by :func:`run_dashboard`: an internal error is saved to a file instead of printed."""
    crash_report: str | None = None
    """The traceback of the first internal error, or None."""

    def _handle_exception(self, error: Exception) -> None:
        # Textual's hook for any unhandled exception (it then exits with return code 1).
        if self.crash_report is None:
            self.crash_report = "".join(traceback.format_exception(error))
        super()._handle_exception(error)

    def _print_error_renderables(self) -> None:
        # Textual prints the traceback to the terminal on exit; run_dashboard saves it to a file
        # and prints one sentence instead.
        if self.crash_to_file and self.crash_report is not None:
            self._exit_renderables.clear()
            return
        super()._print_error_renderables()

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def clear_follow_ups(self) -> ClearFollowUps:
        """The clears this dashboard requested, followed to each run's end."""
        return self.tailer.clear_follow_ups

    @property
    def reader(self) -> DashboardReader | None:
        """The read-only connection, or None while the workspace does not exist yet."""
        return self.tailer.reader

    def now_ms(self) -> int:
        """The app's clock (a manual clock in tests and snapshots)."""
        return self.clock.now_ms()

    async def on_mount(self) -> None:
        self.run_worker(self._tail_loop(), group="tail", exclusive=True, exit_on_error=False)
        self.set_interval(TICK_S, self._tick)
        # Move everything built at start-up out of the collector's view: full collections of
        # the widget tree otherwise show up as 50-100 ms pauses in commit-to-screen latency.
        self.call_after_refresh(gc.freeze)
        for start in self._background:
            self.run_worker(start(self), group="engine", exit_on_error=False)
        self.export_status.take_warnings(self)
        self.export_status.start_checks(self)

    async def on_unmount(self) -> None:
        self._stop.set()
        self.export_status.release()
        # The writable connection of the dashboard's actions and embedded engine (run_control):
        # closed even if it was never used, so a worker finishing late cannot open one.
        from tui.run_control import host_for

        try:
            await host_for(self).close()
        finally:
            async with self._lock:
                await self.tailer.close(final=True)

    async def _watch_loop(self) -> None:
        async for _ in self.tailer.wake_ups(self._stop):
            self._wake.set()

    async def _tail_loop(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_interval)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.poll_once()

    def wake(self) -> None:
        """Ask for a poll now (after a write the dashboard made itself, for instance)."""
        self._wake.set()

    async def poll_once(self) -> Batch | None:
        """Check for commits and, unless paused, refresh the view on screen with them."""
        async with self._lock:
            try:
                batch = await self.tailer.poll()
            except (sqlite3.Error, DatabaseUnavailable) as error:
                self.read_problem = read_problem(error, self.workspace)
                return None
            self.read_problem = None
            self.checked_at_ms = self.now_ms()
            if batch is None:
                return None
            self.commits += 1
            self.changed_at_ms = self.checked_at_ms
            if self.paused:
                self.held_events += len(batch.events)
                self._update_chrome()
                return batch
            screen = self.live_screen()
            if screen is not None:
                await self._apply(screen, batch)
        return batch

    async def _apply(self, screen: LiveScreen, batch: Batch) -> None:
        if not screen.is_mounted:
            return  # it reads everything when it is shown (on_screen_resume)
        inputs = screen.read_inputs()
        try:
            await screen.refresh_data(batch)
            screen.update_chrome()  # freshness, crumb, and the keys that apply now
        except NoMatches:
            return  # the screen was closed while it was reading
        except (sqlite3.Error, TetherError) as error:
            self.read_problem = read_problem(error, self.workspace)
            return
        if batch.first_read or screen.read_with is not None:
            # Up to date with every commit polled so far (a view not on screen gets no
            # batches, so it stays at its last full read).
            screen.read_with = inputs
        if not self._warm_started:
            # The first view has its data: build the others while nobody looks, once its
            # first frame is on the terminal (building a view holds the event loop for tens
            # of milliseconds; before that frame it would delay the first paint).
            self._warm_started = True
            self.call_after_refresh(self.set_timer, WARM_AFTER_S, self._start_warming)
        if self.after_apply is not None:
            callback = self.after_apply
            self.call_after_refresh(callback, batch)

    def _start_warming(self) -> None:
        if self.watch_files:
            # After the first frame too: watchfiles' import and thread cost tens of ms of
            # start-up, and until it runs the slow poll (poll_interval) sees every commit.
            self.run_worker(self._watch_loop(), group="watch", exclusive=True, exit_on_error=False)
        self.run_worker(self._warm_views(), group="warm", exit_on_error=False)

    async def _warm_views(self) -> None:
        """Compose, mount, read and render every view not visited yet, one at a time, after
        the first paint (200-400 ms each on a small machine), so the first press of ``2``/``3``
        /``4`` only draws, like any later switch. Mounted off screen and not resumed, a view
        takes no focus until shown. Textual has no public "build this mode's screen now", so
        this does what ``App._init_mode`` does minus the resume (Textual is pinned to 8.2)."""
        for mode, factory in self.MODES.items():
            await asyncio.sleep(WARM_GAP_S)  # let pending input and repaints go first
            if self._exit or not self.is_running:
                return  # shutting down: Textual is closing the screen stacks
            if mode in self._screen_stacks or not callable(factory):
                continue  # already visited
            css_version = self._css_update_count
            screen, mounted = self._get_screen(factory())
            self._load_screen_css(screen)
            self._screen_stacks[mode] = [screen]
            await mounted
            if self._css_update_count == css_version:
                # Styled at mount by the stylesheet as it is: else the first visit re-parses
                # every CSS source and restyles the app (refresh_css, for an unstyled screen).
                screen._css_update_count = css_version
            # Filled once at the real size (shown with no commit since, it is not read again).
            screen._screen_resized(self.size)
            if isinstance(screen, LiveScreen) and self.reader is not None and not self.paused:
                async with self._lock:
                    if mode != self.current_mode:
                        await self._apply(screen, Batch(first_read=True))
            if mode != self.current_mode and self.is_running:
                # Lay it out and render it once off screen: the widgets' first render (styles,
                # table and plot lines) is most of a first visit's cost.
                await asyncio.sleep(WARM_GAP_S)
                screen._refresh_layout(self.size)
                # The layout sends Resize to the widgets it sized: let them take it first.
                await asyncio.sleep(WARM_GAP_S)
                if mode != self.current_mode and self.is_running:
                    screen._compositor.render_update(full=True)
        # Like the start-up objects, keep the warmed widget trees out of the collector's view.
        gc.freeze()

    async def refresh_screen(self, screen: LiveScreen) -> None:
        """Re-read everything ``screen`` shows (on entering a view, changing filter/scope)."""
        async with self._lock:
            if self.reader is None:
                await self.tailer.open()
            if self.reader is not None and not self.paused:
                await self._apply(screen, Batch(first_read=True))
        screen.update_chrome()

    def live_screen(self) -> LiveScreen | None:
        """The topmost live view of the current mode (a dialog may sit above it)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, LiveScreen):
                return screen
        return None

    def _update_chrome(self) -> None:
        screen = self.live_screen()
        if screen is not None and screen.is_mounted:
            screen.update_chrome()

    async def _tick(self) -> None:
        screen = self.live_screen()
        if screen is None or not screen.is_mounted:
            return
        if not self.paused and self.reader is not None and not self._lock.locked():
            # Elapsed times and stale badges change with time alone, not only with commits.
            async with self._lock:
                await self._apply(screen, Batch())
        try:
            screen.update_chrome()
        except NoMatches:
            return  # the timer fired while the view was still being built (or torn down)

    def status_text(self, width: int | None = None) -> Text:
        """The status line: live/paused, freshness of the data, newest event, problems (fitted
        to ``width`` cells when given, see :func:`tui.status_line.status_line`)."""
        return status_line(self, width)

    # -- selection and navigation ---------------------------------------------------------------

    def remember_runs(self, runs: Iterable[RunRecord]) -> None:
        """Keep the runs last listed (for the command palette)."""
        self.known_runs = {run.run_id: run for run in runs}

    def select(self, *, run_id: str, node_id: str | None = None) -> None:
        """Record the run (and node) the user is looking at; the Tokens view follows it."""
        if run_id != self.selected_run_id or node_id is not None:
            self.selected_node_id = node_id
        self.selected_run_id = run_id

    def open_run(self, run_id: str, node_key: str | None = None) -> None:
        """Show a run's detail screen in the Runs view (on ``node_key`` when given); escape
        returns to where it was opened."""
        self.run_worker(self._open_run(run_id, node_key), group="navigate", exclusive=True)

    async def _open_run(self, run_id: str, node_key: str | None = None) -> None:
        self.select(run_id=run_id)
        origin = self.current_mode
        if origin != "runs":
            await self.switch_mode("runs")
        while len(self.screen_stack) > 1 and not views.is_runs_view(self.screen):
            await self.pop_screen()
        from tui.screens.run_detail import RunDetailScreen

        await self.push_screen(RunDetailScreen(run_id, came_from=origin, node_key=node_key))

    def open_compare(self, run_a: str, run_b: str) -> None:
        """Show two runs side by side over the current view (escape comes back)."""
        from tui.screens.compare_view import CompareScreen

        self.push_screen(CompareScreen(run_a, run_b))

    def open_fork_chain(self, run_id: str) -> None:
        """Show a run's fork chain over the current view (escape comes back)."""
        from tui.screens.fork_chain_view import ForkChainScreen
        self.select(run_id=run_id)
        self.push_screen(ForkChainScreen(run_id))

    def open_cost(self, run_id: str) -> None:
        """Show why a run cost what it did over the current view (escape comes back)."""
        from tui.screens.cost_view import CostScreen

        self.select(run_id=run_id)
        self.push_screen(CostScreen(run_id))

    def show_tokens(self, scope: str) -> None:
        """Switch to the Tokens view with ``scope`` (workspace, run or node)."""
        self.token_scope = scope
        self.run_worker(self.action_show_view("tokens"), group="navigate", exclusive=True)

    async def action_show_view(self, mode: str) -> None:
        """Switch to a top-level view; the view left is remembered for escape. The key of
        the view already shown, on a screen over it (a run, a compare), shows the view itself:
        ``1`` in a run is the Runs list (it did nothing there)."""
        if mode != self.current_mode:
            self.history.append(self.current_mode)
            del self.history[:-HISTORY_DEPTH]
            await self.switch_mode(mode)
            return
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
            await self.pop_screen()

    def can_go_back(self) -> bool:
        """Whether escape has somewhere to go (a run's detail, or an earlier view)."""
        return views.is_run_detail(self.screen) or bool(self.history)

    def go_back(self) -> None:
        """Escape: close a run's detail (back to the view it was opened from), else return to
        the view shown before this one."""
        self.run_worker(self._go_back(), group="navigate", exclusive=True)

    async def _go_back(self) -> None:
        screen = self.screen
        if views.is_run_detail(screen):
            await self.pop_screen()
            if screen.came_from != "runs" and screen.came_from in self.MODES:
                if self.history and self.history[-1] == screen.came_from:
                    self.history.pop()
                await self.switch_mode(screen.came_from)
            return
        if self.history:
            await self.switch_mode(self.history.pop())

    async def action_toggle_pause(self) -> None:
        """Pause or resume live updates (polling and collecting continue while paused)."""
        self.paused = not self.paused
        if not self.paused:
            self.held_events = 0
            screen = self.live_screen()
            if screen is not None:
                await self.refresh_screen(screen)
        self._update_chrome()

    async def confirm_quit(self) -> bool:
        """Whether to quit now; while embedded runs are active a dialog asks first (and quits
        itself on "yes"), see :func:`tui.actions.run_actions.confirm_quit`."""
        from tui.actions.run_actions import confirm_quit

        return await confirm_quit(self)

    async def action_request_quit(self) -> None:
        """Quit (after :meth:`confirm_quit`)."""
        if await self.confirm_quit():
            self.exit()

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, with the web driver (``tether serve``) ending the app once the
        server's stream ends (:mod:`tui.served_driver`)."""
        from tui.served_driver import served_driver

        return served_driver(super().get_driver_class())

    async def action_quit(self) -> None:
        """``ctrl+q`` and the palette's Quit ask first too, like ``q``."""
        await self.action_request_quit()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        from tui.system_commands import dashboard_commands

        return dashboard_commands(self, super().get_system_commands(screen))


def run_dashboard(
    workspace: Workspace,
    *,
    background: Sequence[Callable[[TetherApp], Awaitable[Any]]] = (),
    app_class: type[TetherApp] = TetherApp,
) -> int:
    """Open the dashboard on ``workspace`` in the terminal (blocks until the user quits).

    Returns the exit code: 0, 2 with one sentence when there is no terminal, or
    :data:`tui.crash.CRASH_EXIT_CODE` after an internal error, whose traceback is saved under
    the workspace and named in one sentence on stderr.
    """
    from tui.crash import report_crash
    from tui.terminal import NO_TERMINAL_EXIT, terminal_problem

    if (problem := terminal_problem()) is not None:
        print(f"tether: {problem}", file=sys.stderr)
        return NO_TERMINAL_EXIT

    app = app_class(workspace, background=background)
    app.crash_to_file = True
    app.run()
    if not app.return_code and app.crash_report is None:
        return 0
    return report_crash(
        workspace, app.crash_report or f"The dashboard exited with code {app.return_code}.\n")


