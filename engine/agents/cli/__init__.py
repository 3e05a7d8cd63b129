"""The command agent: an agent CLI (Claude Code, Codex or any program) run as a subprocess.

:mod:`engine.agents.cli.command` runs the process; each preset (:mod:`engine.agents.cli.preset`)
says what that CLI is passed and how its output is read: :mod:`engine.agents.cli.claude_code`,
:mod:`engine.agents.cli.codex` and the generic ``json`` and ``text`` presets of
:mod:`engine.agents.cli.plain_presets`.
"""
