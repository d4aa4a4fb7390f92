"""`elicithub store copy` at a terminal: the copy under a progress bar, and the line that sums it up."""

from __future__ import annotations

from collections import Counter

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from elicithub.store.contents import KINDS
from elicithub.store.copy import copy_store, shown


def copy_with_progress(source: str, target: str, retention_s: float) -> Counter[str]:
    """`copy_store`, its progress drawn on stderr once the records are counted (a copy refused draws none), so
    that stdout has only the summary."""
    columns = (TextColumn("copying records"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=Console(stderr=True))
    task = progress.add_task("copy", total=None)

    def started(total: int) -> None:
        progress.update(task, total=total)
        progress.start()

    async def copy() -> Counter[str]:
        return await copy_store(
            source,
            target,
            retention_s=retention_s,
            started=started,
            copied=lambda records: progress.advance(task, records),
        )

    try:
        return anyio.run(copy)
    finally:
        if progress.live.is_started:
            progress.stop()


def summary(source: str, target: str, counts: Counter[str]) -> str:
    kinds = ", ".join(f"{counts[kind]} {kind}" for kind in KINDS.values())
    return f"copied {counts.total()} records from {shown(source)} to {shown(target)}: {kinds}"
