"""Append notices of the Redis event logs, to the hubs that read a log only: a hub reading a conversation holds a
lease on it in `elicithub:watch:<key>` (a hash: hub token -> lease end, Redis time in ms), each append publishes
its seq to the channel of every other hub holding a live lease, and one subscription per hub wakes its readers.
No blocking `XREAD` per waiting reader, and no hub hears appends it does not read (nor its own)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import redis.asyncio as redis

from elicithub.store.notices import Notifier
from elicithub.store.redis.client import PREFIX, close_pubsub

log = logging.getLogger(__name__)

LISTEN_POLL_S = 1.0
LEASE_SPARE_S = 60.0
"""A lease outlasts the wait that took it by this much; a wait renews it when less than half of that is left."""
KEPT_LEASES = 10_000

# KEYS: the watch hash. ARGV: this hub's token, the lease in ms.
_WATCH = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[1], ARGV[1], now + ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# Appended to the event log's append script. KEYS[3]: the watch hash. ARGV[4]: the channels' prefix, ARGV[5]: the
# appending hub's token, ARGV[6]: the log's key; `seq` is the new event's. Lapsed leases are dropped on the way.
PUBLISH = """
local watchers = redis.call('HGETALL', KEYS[3])
if #watchers > 0 then
    local t = redis.call('TIME')
    local now = t[1] * 1000 + math.floor(t[2] / 1000)
    for i = 1, #watchers, 2 do
        if tonumber(watchers[i + 1]) <= now then
            redis.call('HDEL', KEYS[3], watchers[i])
        elseif watchers[i] ~= ARGV[5] then
            redis.call('PUBLISH', ARGV[4] .. watchers[i], seq .. ' ' .. ARGV[6])
        end
    end
end
"""


def watch_key(key: str) -> str:
    return f"{PREFIX}watch:{key}"


class AppendNotices:
    """This hub's leases and its subscription. `heard(key, seq)` learns of another hub's append and the readers of
    `key` wake; `lapsed(key)` forgets what is kept of a key whose appends may have gone unheard (its lease was not
    held), and after a (re)subscription `lost()` forgets everything kept and every reader wakes."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        token: str,
        heard: Callable[[str, int], None],
        lapsed: Callable[[str], None],
        lost: Callable[[], None],
    ) -> None:
        self._redis = client
        self._watch = client.register_script(_WATCH)
        self.prefix = prefix
        self.token = token
        self.appended = Notifier()
        self._heard = heard
        self._lapsed = lapsed
        self._lost = lost
        self._leases: dict[str, float] = {}
        self._listening: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def watch(self, key: str, timeout_s: float) -> None:
        """Hold a lease on `key` for a wait of up to `timeout_s`; return once its appends are heard here, so a
        read after this misses none."""
        if self._task is None:
            self._listening = asyncio.Event()
            self._task = asyncio.create_task(self._listen(self._listening))
        assert self._listening is not None
        try:
            await asyncio.wait_for(self._listening.wait(), timeout_s)
        except TimeoutError:
            raise redis.ConnectionError("not subscribed to the event log's append notices") from None
        loop = asyncio.get_running_loop()
        lease_s = timeout_s + LEASE_SPARE_S
        held_until = self._leases.get(key, 0.0)
        if held_until - loop.time() > timeout_s + LEASE_SPARE_S / 2:
            return
        lapsed = held_until <= loop.time()
        if len(self._leases) >= KEPT_LEASES:
            self._leases = {k: t for k, t in self._leases.items() if t > loop.time()}
        ends = loop.time() + lease_s
        await self._watch(keys=[watch_key(key)], args=[self.token, int(lease_s * 1000)])
        self._leases[key] = ends
        if lapsed:
            # Appends made elsewhere before the lease were not told here: forget what is kept, so the next read
            # goes to Redis (after the lease, so none can slip in between unheard).
            self._lapsed(key)

    async def _listen(self, listening: asyncio.Event) -> None:
        while not self._closing:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(self.prefix + self.token)
                while not self._closing:
                    message = await pubsub.get_message(timeout=LISTEN_POLL_S)
                    if message is None:
                        continue
                    if message["type"] == "subscribe":  # first, and again after redis-py reconnected
                        self._lost()
                        listening.set()
                        self.appended.notify_all()
                    else:
                        seq, key = str(message["data"]).split(" ", 1)
                        self._heard(key, int(seq))
                        self.appended.notify(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("listening for event log appends failed; listening again in 1 s")
                await asyncio.sleep(1)
            finally:
                await close_pubsub(pubsub)

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, LISTEN_POLL_S * 3)
            self._task = None
