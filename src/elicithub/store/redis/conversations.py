"""The Redis backend's conversations: `elicithub:conversation:<key>`, hashes written by compare-and-set on version,
and their messages in the list `elicithub:conversation-messages:<key>`, added to by the same script."""

from __future__ import annotations

import json
from dataclasses import replace

import redis.asyncio as redis

from elicithub.core.ports import Added
from elicithub.core.runs import ConversationRecord, Message
from elicithub.store.redis.client import PREFIX
from elicithub.store.redis.events import RedisEvents

# KEYS: the conversation, its messages. ARGV: the expected version ('' for none yet), the new JSON, the new version,
# seconds kept, how many messages the writer read, then the messages to add. Past those the writer read, the list
# holds nothing of this conversation (it was read with its messages inline, in a hash of an earlier version, or is
# new): the list goes on from them. Pushed in slices, since Lua's unpack takes some thousands at most.
_PUT_CONVERSATION = """
local current = redis.call('HGET', KEYS[1], 'version')
if (ARGV[1] == '' and current) or (ARGV[1] ~= '' and current ~= ARGV[1]) then
    return 0
end
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'data', ARGV[2])
local stored = tonumber(ARGV[5])
if stored == 0 then
    redis.call('DEL', KEYS[2])
else
    redis.call('LTRIM', KEYS[2], 0, stored - 1)
end
for i = 6, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""


# KEYS: the conversation, its messages, its event log's counter. ARGV: the new record's JSON without its version and
# log position, seconds kept, then the messages of a new conversation (of an existing one, the last is added). A
# record of an earlier form (its messages inline) is left as it is. Returns the record replaced (or false), how many
# messages it had, the version written and the log's newest seq.
_SEND = """
local old = redis.call('HGET', KEYS[1], 'data')
if old and string.find(old, '"messages":', 1, true) then
    return {old, -1, 0, 0}
end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0') + 1
local stored = redis.call('LLEN', KEYS[2])
local after = 0
if old then
    after = tonumber(redis.call('GET', KEYS[3]) or '0')
end
redis.call('HSET', KEYS[1], 'version', version, 'data', written(ARGV[1], version, after))
if old then
    redis.call('RPUSH', KEYS[2], ARGV[#ARGV])
else
    redis.call('DEL', KEYS[2])
    push(KEYS[2], 3)
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return {old or false, stored, version, after}
"""

# Put before a script that writes a conversation: `written(data, version, after)` completes a record's JSON (`data`,
# without its version and log position); `push(list, i)` adds ARGV[i] and those after it to the list, in slices,
# since Lua's unpack takes some thousands at most.
WRITE = """
local function written(data, version, after)
    return string.sub(data, 1, -2) .. ',"version":' .. version .. ',"active_run_after":' .. after .. '}'
end
local function push(list, first)
    for i = first, #ARGV, 1000 do
        redis.call('RPUSH', list, unpack(ARGV, i, math.min(i + 999, #ARGV)))
    end
end
"""


def partial_json(record: ConversationRecord) -> str:
    """The record's JSON without its version and log position, which the store's script completes."""
    data = record.to_json()
    del data["version"], data["active_run_after"]
    return json.dumps(data, separators=(",", ":"))


def messages_key(key: str) -> str:
    return f"{PREFIX}conversation-messages:{key}"


def decode(items: list[bytes | str]) -> list[Message]:
    """Messages as the list holds them (one JSON text each), decoded as one JSON array."""
    messages: list[Message] = json.loads("[" + ",".join(map(str, items)) + "]")
    return messages


class RedisConversations:
    """Conversations shared by every hub; Redis forgets one (and its messages) `retention_s` after its last write."""

    ordered = True  # one write per turn of the loop (batching), applied in order

    def __init__(self, client: redis.Redis, retention_s: float, events: RedisEvents) -> None:
        self._redis = client
        self._events = events
        self._put = client.register_script(_PUT_CONVERSATION)
        self._send = client.register_script(WRITE + _SEND)
        self._retention_s = max(int(retention_s), 1)

    async def get(self, key: str, *, messages: bool = True) -> ConversationRecord | None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hget(f"{PREFIX}conversation:{key}", "data")
            if messages:
                pipe.lrange(messages_key(key), 0, -1)
            else:
                pipe.llen(messages_key(key))
            data, kept = await pipe.execute()
        if data is None:
            return None
        if messages:
            return ConversationRecord.from_json(json.loads(data), decode(kept), len(kept))
        return ConversationRecord.from_json(json.loads(data), stored=kept)

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        args: list[str | int] = [
            "" if expected_version is None else str(expected_version),
            json.dumps(record.to_json(), separators=(",", ":")),
            str(record.version),
            self._retention_s,
            record.stored,
            *(json.dumps(m, separators=(",", ":")) for m in record.messages[record.stored :]),
        ]
        keys = [f"{PREFIX}conversation:{record.key}", messages_key(record.key)]
        return bool(await self._put(keys=keys, args=args))

    async def send(self, record: ConversationRecord) -> Added | None:
        keys = [f"{PREFIX}conversation:{record.key}", messages_key(record.key), f"{PREFIX}events-seq:{record.key}"]
        args: list[str | int] = [
            partial_json(record),
            self._retention_s,
            *(json.dumps(m, separators=(",", ":")) for m in record.messages),
        ]
        old, stored, version, after = await self._send(keys=keys, args=args)
        if int(stored) < 0:
            return None
        previous = None if old is None else ConversationRecord.from_json(json.loads(old), stored=int(stored))
        count = int(stored) + 1 if previous is not None else len(record.messages)
        written = replace(record, messages=[], version=int(version), active_run_after=int(after), stored=count)
        return Added(previous, written)

    async def purge(self, idle_before: float) -> int:
        # Idle conversations expire by their TTL, their messages and event logs with them; what this hub keeps of
        # those logs goes here.
        self._events.forget_idle(idle_before)
        return 0
