"""Tools an agent may call during an attempt (the memory runtime offers ``remember``/``recall``).

A tool is described by a JSON Schema for its arguments, so HTTP agents can offer it through
function calling and the simulated agent can call it directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class AgentTool:
    """One callable tool: its name, what it does, its argument schema and its handler."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    metadata: dict[str, Any] = field(default_factory=dict)

    async def call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run the tool with already-parsed JSON arguments."""
        return await self.handler(arguments)
