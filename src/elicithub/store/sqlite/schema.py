"""The SQLite file's tables, one per record kind: files written by earlier hubs hold these names and columns, and
get the tables added since when a hub opens them (a conversation's messages: inline in its row before they had a
table of their own, and read from there until its next write moves them)."""

from __future__ import annotations

SCHEMA = """
CREATE TABLE IF NOT EXISTS elicitations (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    expires_at REAL NOT NULL,
    resolved_at REAL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS elicitations_pending ON elicitations (state, expires_at);
CREATE INDEX IF NOT EXISTS elicitations_resolved ON elicitations (resolved_at);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL
);
DROP INDEX IF EXISTS runs_unfinished;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, updated_at);
CREATE TABLE IF NOT EXISTS conversations (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    active INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_idle ON conversations (active, updated_at);
CREATE TABLE IF NOT EXISTS conversation_messages (
    key TEXT NOT NULL,
    pos INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (key, pos)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vault (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at REAL);
CREATE TABLE IF NOT EXISTS kv_entries (
    key TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (key, expires_ms, value)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_entries_expiring ON kv_entries (expires_ms);
CREATE TABLE IF NOT EXISTS kv_holds (
    key TEXT NOT NULL,
    member TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (key, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_holds_expiring ON kv_holds (expires_ms);
"""
