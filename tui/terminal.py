"""Whether the dashboard has a terminal to draw on and read keys from.

Started with stdin or stdout not a terminal (``tether < /dev/null``, a CI job, a pipe),
Textual's terminal driver drew into nowhere and waited for keys that never came: the command ran
forever, printing nothing a person could read. A driver named in ``TEXTUAL_DRIVER`` (``tether
serve``'s browser tabs: the web driver talks over pipes) needs no terminal.
"""

from __future__ import annotations

import os
import sys

NO_TERMINAL_EXIT = 2
"""Usage: the dashboard was asked for where it cannot be shown."""


def terminal_problem() -> str | None:
    """One sentence saying the dashboard needs a terminal and what to run instead; None when
    stdin and stdout are terminals (or a driver without one was chosen)."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if stream is None or not stream.isatty()]
    if not missing:
        return None
    return (
        f"the dashboard needs a terminal ({' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not one); without one, list runs with "
        "`tether runs`, run the demo with `tether demo --headless`, or serve the dashboard to "
        "a browser with `tether serve`."
    )
