"""Every character the dashboard draws is in DejaVu Sans Mono, the monospace font a Debian
machine renders the screenshots with and browsers fall back to for ``tether serve``: a glyph
it lacks (the fork mark ⑂, the queued hourglass ⧗ did) shows as a box. Checked with
fontconfig's own coverage query; skipped where fontconfig or the font is not installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FONT = "DejaVu Sans Mono"


def drawn_characters() -> dict[str, str]:
    """Each non-ASCII character in the dashboard's code and styles, with a file using it."""
    found: dict[str, str] = {}
    for path in sorted([*(ROOT / "tui").rglob("*.py"), *(ROOT / "tui").rglob("*.tcss")]):
        for char in path.read_text(encoding="utf-8"):
            if ord(char) > 127:
                found.setdefault(char, str(path.relative_to(ROOT)))
    return found


def covered(char: str) -> bool:
    listed = subprocess.run(["fc-list", f":charset={ord(char):x}", "family"],
                            capture_output=True, text=True, check=True).stdout
    return FONT in listed


def test_the_font_has_every_glyph_the_dashboard_draws() -> None:
    if shutil.which("fc-list") is None or not covered("A"):
        pytest.skip(f"fontconfig with {FONT} is not installed")
    missing = {f"{char} (U+{ord(char):04X}) in {where}"
               for char, where in drawn_characters().items() if not covered(char)}
    assert not missing, sorted(missing)


def test_each_timeline_legend_entry_has_its_own_glyph() -> None:
    """Without colour (``tether runs --timeline`` in a pipe, NO_COLOR) only the character tells
    a cache hit from a tool call: every meaning the legend lists gets a different one."""
    from tui.timeline_draw import GLYPHS, LEGEND

    # "idle" is drawn on the run's own row only, where nothing waits on dependencies.
    node_kinds = [(kind, meaning) for kind, meaning in LEGEND if kind != "idle"]
    shown = [GLYPHS[kind][0] for kind, _meaning in node_kinds]
    assert len(set(shown)) == len(shown), dict(zip([m for _k, m in node_kinds], shown,
                                                   strict=True))
