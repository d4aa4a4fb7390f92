"""The Redis backend's conversations: `elicithub:conversation:<key>`, hashes written by compare-and-set on version."""

from __future__ import annotations

import json

import redis.asyncio as redis

from elicithub.core.runs import ConversationRecord
from elicithub.store.redis.client import PREFIX

# KEYS: the conversation. ARGV: the expected version ('' for none yet), the new JSON, the new version, seconds kept.
_PUT_CONVERSATION = """
local current = redis.call('HGET', KEYS[1], 'version')
if (ARGV[1] == '' and current) or (ARGV[1] ~= '' and current ~= ARGV[1]) then
    return 0
end
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'data', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


class RedisConversations:
    """Conversations shared by every hub; Redis forgets one `retention_s` after its last write."""

    def __init__(self, client: redis.Redis, retention_s: float) -> None:
        self._redis = client
        self._put = client.register_script(_PUT_CONVERSATION)
        self._retention_s = max(int(retention_s), 1)

    async def get(self, key: str) -> ConversationRecord | None:
        data = await self._redis.hget(f"{PREFIX}conversation:{key}", "data")
        return None if data is None else ConversationRecord.from_json(json.loads(data))

    async def put(self, record: ConversationRecord, expected_version: int | None) -> bool:
        args: list[str | int] = [
            "" if expected_version is None else str(expected_version),
            json.dumps(record.to_json(), separators=(",", ":")),
            str(record.version),
            self._retention_s,
        ]
        return bool(await self._put(keys=[f"{PREFIX}conversation:{record.key}"], args=args))

    async def purge(self, idle_before: float) -> int:
        return 0  # idle conversations expire by their TTL
