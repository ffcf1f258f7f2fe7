"""A small ticket desk as an MCP server: the example of docs/tutorials/own-tool.md.

Written with the official ``mcp`` SDK (``MCPServer``, called ``FastMCP`` before
mcp 2.0). Two tools only read (``find_tickets``, ``get_ticket``); one writes
(``open_ticket``). The desk is ``tickets.jsonl`` in the working directory, which
starts with two tickets. Under Gatehouse that directory is the run's own
``.mcp/<connector>`` folder in its workspace, the one place the sandbox lets the
server write. No network.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp.server.mcpserver import MCPServer

DESK = Path("tickets.jsonl")
SEED = [
    {"id": "T-101", "title": "Login page slow on Mondays", "status": "open", "body": ""},
    {"id": "T-102", "title": "Export to CSV drops accents", "status": "closed", "body": ""},
]

server = MCPServer("tickets")


def _tickets() -> list[dict[str, str]]:
    if not DESK.exists():
        return list(SEED)
    return [json.loads(line) for line in DESK.read_text("utf-8").splitlines() if line]


@server.tool()
def find_tickets(query: str) -> list[dict[str, str]]:
    """Find tickets whose title contains the query (any case). Reads only."""
    found = [t for t in _tickets() if query.lower() in t["title"].lower()]
    return [{"id": t["id"], "title": t["title"], "status": t["status"]} for t in found]


@server.tool()
def get_ticket(ticket_id: str) -> dict[str, str]:
    """One ticket by its id, e.g. T-101. Reads only."""
    for ticket in _tickets():
        if ticket["id"] == ticket_id:
            return ticket
    raise ValueError(f"no ticket {ticket_id}")


@server.tool()
def open_ticket(title: str, body: str) -> dict[str, str]:
    """Open a new ticket; answers with its id. Writes to the desk."""
    tickets = _tickets()
    ticket = {"id": f"T-{101 + len(tickets)}", "title": title, "status": "open", "body": body}
    lines = [json.dumps(t) for t in [*tickets, ticket]]
    DESK.write_text("\n".join(lines) + "\n", "utf-8")
    return ticket


if __name__ == "__main__":
    server.run("stdio")
