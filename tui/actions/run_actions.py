"""Run control from the dashboard: ``n`` launch, ``x`` clear, ``c`` cancel, ``R`` resume,
``d`` delete, and the quit confirmation while embedded runs are active.

:class:`RunControlScreen` is the base of views that have a selected run (the Runs list). Each
key is shown in the footer only when it applies to the selected run (``check_action``), and
does nothing otherwise. Destructive actions ask first, naming the exact run. The work itself is
done by :class:`tui.run_control.EngineHost`, i.e. by the same store and engine functions as
``tether cancel`` / ``tether clear`` / ``tether run --resume``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.widgets import DataTable

from store.model.run_records import RunRecord
from tui.actions.feedback import write_safely
from tui.actions.read_only import write_refused
from tui.format import one_line
from tui.plain import plural
from tui.screens.live_screen import LiveScreen

if TYPE_CHECKING:
    # The launch dialog (its text area, its select) is imported when n is first pressed; the
    # write side (tui.run_control: the writable database, the stores, the engine) and the
    # confirmations when a run key is first used, so the Runs view's first paint waits for
    # none of them.
    from tui.modals.launch import LaunchRequest, WorkflowChoice
    from tui.run_control import EngineHost, KnownWorkflow

TERMINAL = ("finished", "failed", "cancelled", "handed-off")


def allowed_run_actions(run: RunRecord | None, now_ms: int) -> set[str]:
    """Which run keys apply to ``run`` (pure policy, tested directly).

    - clear: a run that is not finished or handed off (a stale, failed or cancelled run gets
      its fresh generation at once; a live one hands off at its next dispatch);
    - cancel: a running (even stale) or pending run;
    - resume: a stale run, or a failed or cancelled one (finished nodes never run again);
    - delete: a finished, failed, cancelled or handed-off run, or a stale one.
    """
    allowed = {"launch_run"}
    if run is None:
        return allowed
    stale = run.is_stale(now_ms)
    if run.status not in ("finished", "handed-off"):
        allowed.add("clear_run")
    if run.status in ("running", "pending"):
        allowed.add("cancel_run")
    if stale or run.status in ("failed", "cancelled"):
        allowed.add("resume_run")
    if stale or run.status in TERMINAL:
        allowed.add("delete_run")
    return allowed


def run_target(run: RunRecord) -> Text:
    """The exact run a dialog is about: id, workflow, status, generation."""
    text = Text.assemble(("run ", "dim"), (run.run_id, "bold"), ("  workflow ", "dim"))
    text.append(run.workflow)
    text.append(f"  {run.status}", style="dim")
    if run.generation:
        text.append(f"  generation {run.generation}", style="dim")
    return text


def workflow_choice(known: KnownWorkflow) -> WorkflowChoice:
    """How a workflow file is offered in the launch dialog: by its name and its full path (the
    file is only loaded, and so run, once the person launches it)."""
    from tui.modals.launch import WorkflowChoice

    return WorkflowChoice(
        key=str(known.path),
        name=known.name,
        source=f"the bundled example {known.path.name}" if known.bundled else str(known.path),
        description=known.declaration.description,
        example_input=json.dumps(known.example_input, indent=2, ensure_ascii=False),
        validate=known.problem,
    )


class RunControlScreen(LiveScreen):
    """A live view with a selected run and the run-control keys."""

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("n", "launch_run", "Launch"),
        Binding("x", "clear_run", "Clear"),
        Binding("c", "cancel_run", "Cancel run"),
        Binding("R", "resume_run", "Resume"),
        Binding("d", "delete_run", "Delete run"),
    ]
    KEY_NOTES: ClassVar[dict[str, str]] = {
        "clear_run": "a run that is not finished or handed off",
        "cancel_run": "a running (or stale) or pending run",
        "resume_run": "a stale, failed or cancelled run",
        "delete_run": "a finished, failed, cancelled, handed-off or stale run",
    }
    """When each run key applies (listed by ? help)."""
    RUN_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"launch_run", "clear_run", "cancel_run", "resume_run", "delete_run"}
    )

    @property
    def host(self) -> EngineHost:
        """The dashboard's writable side (embedded engine and writable connection)."""
        from tui.run_control import host_for

        return host_for(self.app)

    def selected_run(self) -> RunRecord | None:
        """The run the keys act on: the one under the cursor, as last read."""
        run_id = getattr(self, "selected_run_id", None)
        if not isinstance(run_id, str):
            return None
        return self.tether.known_runs.get(run_id)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide run keys that do not apply to the selected run (all of them read-only)."""
        if write_refused(self.app, action):
            return False
        if action in self.RUN_ACTIONS:
            if self._opening_dialog():
                return False  # a run key typed while the last one reads: dropped, not queued
            return action in allowed_run_actions(self.selected_run(), self.tether.now_ms())
        return super().check_action(action, parameters)

    def _opening_dialog(self) -> bool:
        """A run key's work is under way with this view still on top (reading the run before
        its dialog opens, or writing after it closed)."""
        return self.app.screen is self and any(
            w.group == "run-action" and w.node is self and not w.is_finished
            for w in self.workers)

    def update_chrome(self) -> None:
        super().update_chrome()
        # The selected run's status may have changed with the data: re-evaluate the footer.
        self.refresh_bindings()

    @on(DataTable.RowHighlighted)
    def _run_highlighted(self) -> None:
        self.refresh_bindings()

    def _target(self, action: str) -> RunRecord | None:
        run = self.selected_run()
        if run is None or write_refused(self.app, action):
            return None
        return run if action in allowed_run_actions(run, self.tether.now_ms()) else None

    async def _recorded(self, run: RunRecord) -> RunRecord | None:
        """The run as stored, with the workflow file it records (the list leaves it out)."""

        async def read() -> RunRecord:
            return await (await self.host.runs()).get_run(run.run_id)

        return await write_safely(self, read)

    # -- the keys -------------------------------------------------------------------------

    def action_launch_run(self) -> None:
        """Pick a workflow the workspace knows, edit its JSON input, start it embedded (or, on
        a PostgreSQL workspace, queue it for a worker)."""
        from tui.modals.launch import LaunchRunDialog

        by_key: dict[str, KnownWorkflow] = {}

        async def load() -> list[WorkflowChoice] | None:
            found = await write_safely(self, self.host.known_workflows)
            if found is None:
                return None
            known, problems = found
            for problem in problems:
                self.app.notify(problem, title="workflow not offered", severity="warning",
                                markup=False)
            by_key.update({str(k.path): k for k in known})
            return [workflow_choice(k) for k in known]

        def chosen(request: LaunchRequest | None) -> None:
            if request is not None:
                self._launch(by_key[request.choice.key], request)

        # Pushed here, before this key's handling ends, and before the workflows are read:
        # every key typed after `n` goes to the dialog, none to this view.
        self.app.push_screen(LaunchRunDialog(load=load, queues=self.host.queues_runs),
                             callback=chosen)

    @work(group="run-action", exclusive=True)
    async def _launch(self, chosen: KnownWorkflow, request: LaunchRequest) -> None:
        """Start (or queue) the run the launch dialog asked for."""
        if self.host.queues_runs:
            queued = await write_safely(self, lambda: self.host.enqueue(chosen, request.input))
            if queued is not None:
                self.app.notify(
                    f"Queued {chosen.name} as {queued.run_id}; a tether worker will run it.",
                    markup=False,
                )
                self._wake()
            return
        started = await write_safely(self, lambda: self.host.launch(chosen, request.input))
        if started is not None:
            self.app.notify(f"Started {chosen.name} ({started}) in the embedded engine.",
                            markup=False)
            await self.show_run(started)

    @work(group="run-action", exclusive=True)
    async def action_clear_run(self) -> None:
        """Durable /clear of the selected run, with an optional reason."""
        listed = self._target("clear_run")
        run = None if listed is None else await self._recorded(listed)
        if run is None:
            return
        from tui.modals.reason import clear_run_dialog

        answer = await self.app.push_screen_wait(
            clear_run_dialog(run.run_id, run.workflow, run.workflow_path)
        )
        if answer is None:
            return
        from engine.handoff import DEFAULT_CLEAR_REASON

        reason = answer.reason or DEFAULT_CLEAR_REASON
        # Followed from before the write: the run may end while the request is written.
        follow = self.tether.clear_follow_ups
        follow.expect(run.run_id)
        result = await write_safely(self, lambda: self.host.clear(run.run_id, reason))
        if result is None or not result.requested:
            follow.forget(run.run_id)
        if result is None:
            return
        if result.requested:
            # What became of it is said when the run hands off or ends (tui.clear_follow).
            message = f"Clear requested; {run.run_id} hands off at its next dispatch."
        else:
            message = f"{run.run_id} handed off to {result.new_run_id}."
        self.app.notify(message, markup=False)
        self._wake()
        if result.new_run_id is not None:
            await self.show_run(result.new_run_id)

    cursor_wanted: str | None = None
    """A run just created here: the cursor goes to it as soon as the list shows it."""

    async def show_run(self, run_id: str) -> None:
        """Put the cursor on ``run_id`` (a run just created here), now or once it is listed."""
        self.cursor_wanted = run_id
        self._wake()
        await self.tether.refresh_screen(self)

    @work(group="run-action", exclusive=True)
    async def action_cancel_run(self) -> None:
        """Cancel the selected run after a confirmation naming it."""
        run = self._target("cancel_run")
        if run is None:
            return
        from tui.modals.confirm import ConfirmDialog

        confirmed = await self.app.push_screen_wait(
            ConfirmDialog("Cancel this run?", run_target(run), confirm_label="Stop the run",
                          cancel_label="Keep it running",
                          detail="Its running tasks stop; finished nodes keep their outputs.")
        )
        if not confirmed:
            return
        record = await write_safely(self, lambda: self.host.cancel(run.run_id))
        if record is not None:
            done = record.status == "cancelled"
            self.app.notify(
                f"Run {run.run_id} cancelled." if done
                else f"Cancel requested for {run.run_id}; its engine stops it shortly.",
                markup=False,
            )
            self._wake()

    @work(group="run-action", exclusive=True)
    async def action_resume_run(self) -> None:
        """Resume the selected stale (or failed/cancelled) run in the embedded engine."""
        listed = self._target("resume_run")
        run = None if listed is None else await self._recorded(listed)
        if run is None:
            return
        # The run's workflow file is whatever its row records (anyone who can write the
        # workspace chose it): name it before this process loads and runs it.
        from tui.modals.confirm import ConfirmDialog

        confirmed = await self.app.push_screen_wait(
            ConfirmDialog(
                "Resume this run here?", run_target(run), confirm_label="Resume",
                cancel_label="Leave it",
                detail="It continues in this dashboard's engine, which loads and runs "
                       f"{run.workflow_path or 'its workflow file (none is recorded)'}; "
                       "finished nodes never run again.",
            )
        )
        if not confirmed:
            return
        started = await write_safely(self, lambda: self.host.resume(run.run_id))
        if started is not None:
            self.app.notify(f"Resuming {run.run_id} in the embedded engine.", markup=False)
            self._wake()

    @work(group="run-action", exclusive=True)
    async def action_delete_run(self) -> None:
        """Delete the selected finished run and its artifacts after a confirmation."""
        run = self._target("delete_run")
        if run is None:
            return
        from tui.modals.confirm import ConfirmDialog

        confirmed = await self.app.push_screen_wait(
            ConfirmDialog(
                "Delete this run?", run_target(run), confirm_label="Delete run",
                detail="Its nodes, attempts, calls, memory blocks and artifact files are "
                       "removed; this cannot be undone.",
            )
        )
        if not confirmed:
            return
        deleted = await write_safely(self, lambda: self.host.delete(run.run_id))
        if deleted is not None:
            self.app.notify(f"Deleted run {deleted} and its artifacts.", markup=False)
            self._wake()

    def _wake(self) -> None:
        self.tether.wake()


async def confirm_quit(app: Any) -> bool:
    """True to quit now. While embedded runs are active, ask first (naming them) and return
    False; the dialog quits on "yes", leaving those runs resumable (they show as stale)."""
    from tui.run_control import host_for

    host = host_for(app)
    active = await host.active_runs()
    if not active:
        return True
    from tui.modals.confirm import ConfirmDialog, named_targets

    names = named_targets([(run.run_id, one_line(run.workflow, "dim")) for run in active],
                          limit=8)

    async def decided(quit_now: bool | None) -> None:
        if quit_now:
            # Stop our runs first; the app closes the connection when it unmounts.
            await host.abandon()
            app.exit()

    count = len(active)
    # "it" for one run: "They stop with the dashboard" under "Quit with 1 embedded run".
    detail = ("{} with the dashboard and {} resumable: after 30 s {} as stale, and R (or tether "
              "run --resume) continues {}.").format(
        *(("It stops", "stays", "it shows", "it") if count == 1 else
          ("They stop", "stay", "they show", "them")))
    app.push_screen(
        ConfirmDialog(
            f"Quit with {plural(count, 'embedded run')} still running?",
            names,
            confirm_label="Quit",
            cancel_label="Stay",
            detail=detail,
        ),
        decided,
    )
    return False


def palette_commands(app: Any) -> list[SystemCommand]:
    """Command-palette entries (``ctrl+p``) for the dashboard's actions."""
    return [
        SystemCommand(
            "Launch a run",
            "Pick a workflow and edit its JSON input; it runs in the embedded engine (n in Runs)",
            lambda: app.run_worker(_launch_from_anywhere(app), group="navigate"),
        ),
        SystemCommand(
            "Review pending notes",
            "Open the oldest pending note proposal beside what it would supersede",
            lambda: app.run_worker(_review_from_anywhere(app), group="navigate"),
        ),
    ]


async def _launch_from_anywhere(app: Any) -> None:
    await app.action_show_view("runs")
    screen = app.live_screen()
    if isinstance(screen, RunControlScreen):
        screen.action_launch_run()


async def _review_from_anywhere(app: Any) -> None:
    from tui.screens.memory_view import MemoryScreen

    await app.action_show_view("memory")
    screen = app.live_screen()
    if isinstance(screen, MemoryScreen):
        await screen.refresh_data()
        screen.review_first_pending()
