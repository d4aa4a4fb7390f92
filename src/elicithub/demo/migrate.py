"""The deploy server's `migrate` tool, which runs as an MCP task: it checks the database, asks the person to confirm
half way through, and applies the pending migrations (all simulated, one step per poll)."""

from __future__ import annotations

from mcp.server.extension import ToolBinding
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.server import require_client_extension

from elicithub.core.jsoncodec import JsonObject
from elicithub.demo.tasks import Step, Task, TaskTools, form, text
from elicithub.protocol.mcp_tasks import TASKS_EXTENSION

PENDING = ["0042_add_order_status", "0043_index_orders_by_customer", "0044_drop_legacy_totals"]
CONFIRM = "confirm"
POLL_MS = 250
"""How soon the client is asked to look again: each look moves the migration one step on."""


def _form(database: str) -> JsonObject:
    count = len(PENDING)
    schema = {
        "type": "object",
        "properties": {
            "apply": {
                "type": "boolean",
                "title": f"Apply {count} pending migrations",
                "description": ", ".join(PENDING),
            }
        },
        "required": ["apply"],
    }
    return form(f"Apply {count} pending migrations to {database}?", schema)


def _steps(database: str) -> list[Step]:
    return [
        ("work", f"Connecting to {database}"),
        ("work", f"Checking the schema of {database}: {len(PENDING)} migrations pending"),
        ("ask", {CONFIRM: _form(database)}),
        *(("work", f"Applying {name}") for name in PENDING),
    ]


def start(arguments: JsonObject, task_id: str) -> Task:
    database = str(arguments.get("database") or "orders-db")

    def finish(task: Task) -> JsonObject:
        return text(f"Migrated {database}: {len(PENDING)} migrations applied.")

    def judge(task: Task, response: JsonObject) -> JsonObject | None:
        if response.get("action") == "accept" and (response.get("content") or {}).get("apply") is True:
            return None
        return text(f"Migration of {database} stopped: not confirmed, nothing was applied.")

    return Task(task_id, _steps(database), finish, judge, poll_ms=POLL_MS)


async def migrate(ctx: Context, database: str = "orders-db") -> str:
    """Apply the pending schema migrations to a database; runs as an MCP task and asks for confirmation first."""
    # Reached only by a call that did not declare the tasks extension (TaskTools answers the others): this tool
    # cannot run without it, which the SDK's -32021 error says.
    require_client_extension(ctx.request_context, TASKS_EXTENSION)
    raise AssertionError("a call that declared the tasks extension runs as a task")


def migrations() -> TaskTools:
    """The extension that gives an `MCPServer` the `migrate` tool and the tasks it runs as."""
    return TaskTools([ToolBinding(migrate)], {"migrate": start})
