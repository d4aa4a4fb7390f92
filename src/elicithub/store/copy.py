"""`elicithub store copy`: everything one store holds, written into another that is empty, with the hubs stopped; how
a team moves from the embedded SQLite store to Redis or Postgres (docs/stores.md). What each store holds, and how
it is read and written, is in each backend's `contents` module (see store/contents.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from elicithub.config import ConversationsConfig, StoreConfig
from elicithub.errors import StoreUnsupported, StoreUnusable
from elicithub.store.contents import KINDS, Contents

USE = "sqlite:///PATH, redis://HOST:PORT/DB or postgresql://USER:PASS@HOST/DB"

RETENTION_S = ConversationsConfig().retention_s


def shown(url: str) -> str:
    """The URL without its password, to print."""
    return StoreConfig.model_construct(url=url).shown_url


def checked(url: str) -> str:
    """`url` if a copy can read or write that store: a URL a hub's config takes, but for memory://, whose records
    live only in their hub's process."""
    try:
        StoreConfig(url=url)
    except ValidationError:
        raise StoreUnsupported(f"unsupported store url {shown(url)!r}; use {USE}") from None
    if url == "memory://":
        raise StoreUnsupported(f"memory:// keeps nothing outside its hub's process, so nothing to copy; use {USE}")
    return url


async def open_contents(url: str, *, target: bool, retention_s: float = RETENTION_S) -> Contents:
    """The contents of the store at `url` (a `checked` one), to read or (`target`) to write."""
    if url.startswith("sqlite:///"):
        from elicithub.store.sqlite.contents import SqliteContents

        return SqliteContents(Path(url.removeprefix("sqlite:///")), target=target)
    if url.startswith("redis://"):
        from elicithub.store.redis.contents import open_redis_contents

        return await open_redis_contents(url, target=target, retention_s=retention_s)
    from elicithub.store.postgres.contents import open_postgres_contents

    return await open_postgres_contents(url, target=target)


async def copy_store(
    source_url: str,
    target_url: str,
    *,
    retention_s: float = RETENTION_S,
    started: Callable[[int], None] = lambda total: None,
    copied: Callable[[int], None] = lambda records: None,
) -> Counter[str]:
    """Copy every record of the source into the target, which must hold nothing; how many of each kind.
    `started(total)` tells how many records there are to copy, `copied(n)` each batch as it is written. Raises
    StoreUnsupported for a URL no copy takes, StoreUnusable for a store it must not use (see each `contents`);
    `retention_s`: how long a Redis target keeps an idle conversation (the hubs' `conversations.retention_s`)."""
    checked(source_url)
    checked(target_url)
    source = await open_contents(source_url, target=False)
    try:
        await source.check()
        target = await open_contents(target_url, target=True, retention_s=retention_s)
        try:
            held = await target.held()
            if held is not None:
                raise StoreUnusable(
                    f"the store {shown(target_url)} is not empty ({held}): copy only into an empty store"
                )
            started(await source.count())
            counts: Counter[str] = Counter()
            try:
                async for batch in source.read():
                    await target.write(batch)
                    counts.update(KINDS[type(record)] for record in batch)
                    copied(len(batch))
            except Exception as exc:  # whatever the backend's error: the target is no longer empty, say so
                raise StoreUnusable(
                    f"the copy stopped ({type(exc).__name__}: {exc}); the store {shown(target_url)} holds part of "
                    "the records now: empty it before copying again"
                ) from exc
            return counts
        finally:
            await target.close()
    finally:
        await source.close()
