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
APPEND_LEASE_S = 90.0
"""The lease an append takes along on its log, for the readers on its own hub: renewed by an append when less
than half of it is left."""
KEPT_LEASES = 10_000

# Put before a script that leases: `lease(watch, token, ms, now)` makes `token`'s lease in the hash `watch` last at
# least `ms` from `now` (a lease only ever grows, here as in the hub's own record of it).
LEASE = """
local function lease(watch, token, ms, now)
    if tonumber(redis.call('HGET', watch, token) or '0') < now + ms then
        redis.call('HSET', watch, token, now + ms)
    end
    if redis.call('PTTL', watch) < ms then
        redis.call('PEXPIRE', watch, ms)
    end
end
"""

# KEYS: the watch hash, the log's counter. ARGV: this hub's token, the lease in ms. Returns the log's newest seq
# as the lease begins: every append after it is heard.
_WATCH = (
    LEASE
    + """
local t = redis.call('TIME')
lease(KEYS[1], ARGV[1], tonumber(ARGV[2]), t[1] * 1000 + math.floor(t[2] / 1000))
return tonumber(redis.call('GET', KEYS[2]) or '0')
"""
)

# Put before the event log's append script: `publish(watch, seq, key)` tells every other hub holding a live lease
# on log `key` (in the hash `watch`) that it now reaches `seq`, dropping lapsed leases on the way. `now` is Redis
# time in ms, ARGV[3] the channels' prefix, ARGV[4] the appending hub's token.
PUBLISH = """
local function publish(watch, seq, key, now)
    local watchers = redis.call('HGETALL', watch)
    for i = 1, #watchers, 2 do
        if tonumber(watchers[i + 1]) <= now then
            redis.call('HDEL', watch, watchers[i])
        elseif watchers[i] ~= ARGV[4] then
            redis.call('PUBLISH', ARGV[3] .. watchers[i], seq .. ' ' .. key)
        end
    end
end
"""


def watch_key(key: str) -> str:
    return f"{PREFIX}watch:{key}"


class AppendNotices:
    """This hub's leases and its subscription. `heard(key, seq)` learns of another hub's append and the readers of
    `key` wake; `lapsed(key, top)` forgets what is kept of a key whose appends may have gone unheard (its lease was
    not held; `top`, when known, is the log's newest seq as the new lease began), and after a (re)subscription
    `lost()` forgets everything kept and every reader wakes."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        token: str,
        heard: Callable[[str, int], None],
        lapsed: Callable[[str, int | None], None],
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

    def start(self) -> None:
        """Subscribe (once): appends of this hub take leases along only once it listens."""
        if self._task is None:
            self._listening = asyncio.Event()
            self._task = asyncio.create_task(self._listen(self._listening))

    def holds(self, key: str) -> bool:
        """Whether this hub hears every append to `key` made elsewhere (it holds a live lease, and listens)."""
        listening = self._listening is not None and self._listening.is_set()
        return listening and self._leases.get(key, 0.0) > asyncio.get_running_loop().time()

    def renews(self, key: str) -> bool:
        """Whether an append to `key` now should take this hub's lease along (renewing it when half is used)."""
        if self._listening is None or not self._listening.is_set():
            return False
        return self._leases.get(key, 0.0) - asyncio.get_running_loop().time() <= APPEND_LEASE_S / 2

    def renewed(self, key: str, since: float) -> None:
        """An append asked for at loop time `since` took the lease on `key`. If the lease had lapsed, what is kept of
        `key` may miss appends made elsewhere meanwhile: forget it (the append's own events are kept after)."""
        if self._leases.get(key, 0.0) <= since:
            self._lapsed(key, None)
        self._keep_lease(key, since + APPEND_LEASE_S)

    def _keep_lease(self, key: str, ends: float) -> None:
        if len(self._leases) >= KEPT_LEASES:
            self.forget_lapsed()
        self._leases[key] = max(ends, self._leases.get(key, 0.0))

    def forget_lapsed(self) -> None:
        """Let go of the leases that have ended (a log read again takes a new one)."""
        now = asyncio.get_running_loop().time()
        self._leases = {k: t for k, t in self._leases.items() if t > now}

    async def watch(self, key: str, counter: str, timeout_s: float) -> None:
        """Hold a lease on `key` (whose counter is `counter`) for a wait of up to `timeout_s`; return once its
        appends are heard here, so a read after this misses none."""
        self.start()
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
        ends = loop.time() + lease_s
        top = int(await self._watch(keys=[watch_key(key), counter], args=[self.token, int(lease_s * 1000)]))
        self._keep_lease(key, ends)
        if lapsed:
            # Appends made elsewhere before the lease were not told here: what is kept starts over from the log's
            # top as the lease began (a read from further back goes to Redis).
            self._lapsed(key, top)

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
