"""The dashboard's driver under ``tether serve``: Textual's web driver, ending the app when the
server's stream ends.

textual-serve runs one ``tether tui`` per browser tab and relays its screen through pipes.
Textual's web driver quits on the server's "quit" message or a SIGTERM, but when its input
simply ends (the server was killed, or stopped while the dashboard was still starting and the
quit went unheard) its input thread returns and the app runs on, alone, holding its workspace,
with nobody to show anything to. The end of the input is the end of the session: the app is
asked to exit, and should it still be running :data:`EXIT_GRACE_S` later (an exit asked while
it was starting can go unheard: seen under load), the process ends. That is safe at any moment
(the workspace survives a kill -9 of any process, its runs stay resumable) and no one can reach
this dashboard any more.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from textual import messages
from textual.driver import Driver

EXIT_GRACE_S = 10.0
"""How long a served dashboard whose input ended may take to exit before its process ends."""


def served_driver(driver_class: type[Driver]) -> type[Driver]:
    """``driver_class``, or when it is Textual's web driver (textual-serve names it in the
    environment), a subclass that exits the app once its input ends."""
    web = sys.modules.get("textual.drivers.web_driver")
    base: Any = getattr(web, "WebDriver", None)
    if base is None or not issubclass(driver_class, base):
        return driver_class

    class ServedDriver(driver_class):  # type: ignore[valid-type,misc]
        """The web driver, quitting the app when the server's stream ends."""

        def run_input_thread(self) -> None:
            try:
                super().run_input_thread()
            finally:
                if not self.exit_event.is_set():  # not the app's own exit under way
                    self._app.post_message(messages.ExitApp())
                    ending = threading.Timer(EXIT_GRACE_S, os._exit, args=(3,))
                    ending.daemon = True  # a clean exit before then takes it along
                    ending.start()

    return ServedDriver
