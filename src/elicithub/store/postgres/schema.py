"""The Postgres backend's tables, as numbered migration steps, and the one function that applies them.

Every table is named `elicithub_*`, so the hub can share a database with other applications. The steps applied are
rows of `elicithub_migrations`; a step is never edited once released, only followed by a new one, and a step must
leave the tables usable by the hub of the step before (hubs of two versions run side by side during a rollout).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from elicithub.errors import StoreUnusable

MIGRATIONS: tuple[str, ...] = (
    # 1: every record kind, with an index for each query the hub runs on a hot path or in its sweeps.
    """
    CREATE TABLE elicithub_elicitations (
        id text PRIMARY KEY,
        state text NOT NULL,
        expires_at double precision NOT NULL,
        resolved_at double precision,
        data jsonb NOT NULL
    );
    CREATE INDEX elicithub_elicitations_due ON elicithub_elicitations (expires_at) WHERE state = 'pending';
    CREATE INDEX elicithub_elicitations_resolved ON elicithub_elicitations (resolved_at)
        WHERE resolved_at IS NOT NULL;

    CREATE TABLE elicithub_runs (
        run_id text PRIMARY KEY,
        status text NOT NULL,
        owner text NOT NULL,
        updated_at double precision NOT NULL,
        data jsonb NOT NULL
    );
    CREATE INDEX elicithub_runs_unfinished ON elicithub_runs (owner) WHERE status <> 'finished';
    CREATE INDEX elicithub_runs_finished ON elicithub_runs (updated_at) WHERE status = 'finished';

    CREATE TABLE elicithub_instances (
        owner text PRIMARY KEY,
        alive_until double precision NOT NULL
    );

    CREATE TABLE elicithub_conversations (
        key text PRIMARY KEY,
        version bigint NOT NULL,
        active boolean NOT NULL,
        updated_at double precision NOT NULL,
        data jsonb NOT NULL
    );
    CREATE INDEX elicithub_conversations_idle ON elicithub_conversations (updated_at) WHERE NOT active;

    CREATE TABLE elicithub_event_logs (
        key text PRIMARY KEY,
        last bigint NOT NULL
    );
    CREATE TABLE elicithub_events (
        key text NOT NULL,
        seq bigint NOT NULL,
        data jsonb NOT NULL,
        PRIMARY KEY (key, seq)
    );

    CREATE TABLE elicithub_kv (
        key text PRIMARY KEY,
        value bytea NOT NULL,
        expires_at double precision
    );
    CREATE INDEX elicithub_kv_expiring ON elicithub_kv (expires_at) WHERE expires_at IS NOT NULL;
    """,
    # 2: each conversation's messages one row each, written once; rows of step 1 keep theirs inline in `data` until
    # their next write. Hubs of step 1 would read the rows written since without their messages (and runs not at
    # all), so unlike the rule above this step wants them stopped first (docs/stores.md says so).
    """
    CREATE TABLE elicithub_conversation_messages (
        key text NOT NULL,
        pos integer NOT NULL,
        data jsonb NOT NULL,
        PRIMARY KEY (key, pos)
    );
    """,
    # 3: lists of expiring entries (a user's MCP tasks), one row per entry so that writers adding at once never
    # overwrite each other; byte order ("C"), so a page's last entry bounds the next page the same way everywhere.
    """
    CREATE TABLE elicithub_kv_entries (
        key text NOT NULL,
        expires_ms bigint NOT NULL,
        value text COLLATE "C" NOT NULL,
        PRIMARY KEY (key, expires_ms, value)
    );
    CREATE INDEX elicithub_kv_entries_expiring ON elicithub_kv_entries (expires_ms);
    """,
    # 4: the NOTIFY channels of the hubs that wait on each elicitation, which alone hear its end. Hubs of earlier steps
    # NOTIFY and LISTEN on one channel shared by all, so hubs of steps 3 and 4 would not hear each other's ends:
    # like step 2, this step wants them stopped first (docs/stores.md says so).
    """
    ALTER TABLE elicithub_elicitations ADD COLUMN waiters text[] NOT NULL DEFAULT '{}';
    """,
    # 5: sets of members held for a while, up to a limit (what each person holds of the hub: `limits:`). A hold is
    # one call of `elicithub_hold`, which takes the set's lock first, so that of hubs holding at once each counts what
    # the one before it took (every statement in it reads anew); the lock ends with the call's transaction.
    """
    CREATE TABLE elicithub_kv_holds (
        key text NOT NULL,
        member text NOT NULL,
        expires_ms bigint NOT NULL,
        PRIMARY KEY (key, member)
    );
    CREATE INDEX elicithub_kv_holds_expiring ON elicithub_kv_holds (expires_ms);
    CREATE FUNCTION elicithub_hold(hold_key text, hold_member text, now_ms bigint, end_ms bigint, hold_limit integer)
    RETURNS TABLE (taken boolean, held bigint, first_end bigint) LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
        live bigint;
        mine boolean;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('elicithub_kv_holds:' || hold_key, 0));
        DELETE FROM elicithub_kv_holds h WHERE h.key = hold_key AND h.expires_ms <= now_ms;
        SELECT count(*), coalesce(bool_or(h.member = hold_member), false) INTO live, mine
            FROM elicithub_kv_holds h WHERE h.key = hold_key;
        taken := mine OR hold_limit IS NULL OR live < hold_limit;
        IF taken THEN
            INSERT INTO elicithub_kv_holds AS h (key, member, expires_ms) VALUES (hold_key, hold_member, end_ms)
                ON CONFLICT (key, member) DO UPDATE SET expires_ms = excluded.expires_ms;
        END IF;
        SELECT count(*), coalesce(min(h.expires_ms), 0) INTO held, first_end
            FROM elicithub_kv_holds h WHERE h.key = hold_key;
        RETURN NEXT;
    END
    $$;
    """,
)

LATEST = len(MIGRATIONS)

_LOCK = 0x656C6963  # any constant: hubs starting together apply the steps one after the other, not at once

_TABLE = """
CREATE TABLE IF NOT EXISTS elicithub_migrations (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


async def migrate(connection: asyncpg.Connection, steps: Sequence[str] = MIGRATIONS) -> list[int]:
    """Apply the steps the database has not had yet, all in one transaction; returns their numbers.

    Refuses (StoreUnusable) a database that a newer hub has already taken further than `steps` go.
    """
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await connection.execute(_TABLE)
        current = await version(connection)
        if current > len(steps):
            raise StoreUnusable(
                f"the Postgres store's schema is at version {current}, newer than this hub knows ({len(steps)}): "
                "a newer elicithub has upgraded it; run that version (or newer) of elicithub against this database"
            )
        applied = list(range(current + 1, len(steps) + 1))
        for number in applied:
            await connection.execute(steps[number - 1])
            await connection.execute("INSERT INTO elicithub_migrations (version) VALUES ($1)", number)
        return applied


async def version(connection: asyncpg.Connection | asyncpg.Pool) -> int:
    """The last step applied to the database (0 when none)."""
    exists = await connection.fetchval("SELECT to_regclass('elicithub_migrations') IS NOT NULL")
    if not exists:
        return 0
    return int(await connection.fetchval("SELECT coalesce(max(version), 0) FROM elicithub_migrations"))
