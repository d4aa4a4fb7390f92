"""A model's turn streamed through the hub, against the same stand-in read directly (issue 41, item 9).

Run:  uv run python bench/model_stream.py [--n 100] [--warmup 5] [--tokens 500] [--streams 50] [--rate 50]
      [--phases 2] [--spread 1] [--store sqlite|memory] [--profile DIR]
      [--scenarios one,many]

The model stand-in (bench/model_standin.py: tests/models/standins.py's OpenAI chat completions stream, each token
the moment it was sent) and one hub (`elicithub serve`, its model `gpt` on the stand-in, default loop and parser)
run as processes of their own; this process reads both with the same httpx code: the stand-in's
`POST /v1/chat/completions` directly, and the hub's `POST /run/v1/chat/completions` (agent `assistant`), which
the hub answers from a streamed request to the stand-in.

- One stream: `--n` turns of `--tokens` tokens each way, sent as fast as the stand-in can, direct and through the
  hub alternated (after `--warmup` of each); then `--n` turns of one token through the hub, which is what a turn
  costs the hub before its tokens; then `--n` turns of `--tokens` read in this process by the hub's own model
  client (`ProviderModel`, pydantic-ai over the openai SDK), whose CPU per token is the hub's model side alone.
- Many streams: `--streams` streams at once, each `--tokens` tokens at `--rate` tokens per second (the stand-in's
  `delay_s`), their starts spread evenly over `--spread` seconds; `--phases` phases each way, alternated (after
  `--warmup` turns of one stream each way).
  `--profile DIR` samples the hub with py-spy (`pip install py-spy`; as root, or with ptrace allowed) over one
  more phase through the hub, not counted, and summarises where its CPU went (bench/pyspy.py).
To measure a change before making it, run with `PYTHONPATH=` a `src/` tree unpacked apart: the hub and the model
client in this process both import it.

Per way: the time to the first token (request sent -> its first content chunk read), a token's lag (its chunk
read here -> the stand-in sent it, on the machine's monotonic clock), the rate each stream got, and the
difference the hub makes to each; the CPU of the hub, the stand-in and this process (/proc), per token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from processes import ROOT, chat_chunk, cpu_seconds, machine_ticks, pct, serve, shares, stop, wait_for_port
from pyspy import record, summary

TOKEN = "alice-secret"
KEY = "sk-standin-bench"
PROMPT = [{"role": "user", "content": "Tell me about orders."}]
DIRECT, HUB, ONE_TOKEN = "stand-in directly", "through the hub", "through the hub, turns of one token"
PROFILES = {
    "hub-one-token-turns.txt": "turns of one token, one at a time",
    "hub-many-streams.txt": "one more phase of many streams through it",
}
now = time.monotonic  # the machine's clock, as the stand-in's stamps are


class StandIn:
    """bench/model_standin.py in its own process: replies are queued on its stdin before the requests come."""

    def __init__(self) -> None:
        command = [sys.executable, str(ROOT / "bench" / "model_standin.py")]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in, self._out = self.process.stdin, self.process.stdout
        self.url = self._out.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError(f"the stand-in did not start (exit {self.process.poll()})")

    def queue(self, n: int, tokens: int, delay_s: float) -> None:
        self._in.write(f"{n} {tokens} {delay_s}\n")
        self._in.flush()
        if self._out.readline().strip() != "queued":
            raise RuntimeError("the stand-in did not queue the replies")

    def close(self) -> None:
        self._in.close()  # its end of input: it stops
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Read:
    """One stream as its reader saw it."""

    first: float  # request sent -> first content chunk read (s)
    lags: list[float]  # per token: read here -> sent by the stand-in (s)
    rate: float  # tokens per second, first token to last


@dataclass
class Tally:
    """One way's reads over a scenario, and what the processes spent meanwhile."""

    firsts: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    tokens: int = 0
    turns: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds
    busy: list[float] = field(default_factory=list)  # the machine's busy share (%) over each phase
    wall: float = 0.0  # seconds measured

    def add(self, read: Read) -> None:
        self.firsts.append(read.first)
        self.lags += read.lags
        self.rates.append(read.rate)
        self.tokens += len(read.lags)
        self.turns += 1


class Way:
    """One way to read a model's stream: the stand-in directly, or the hub's OpenAI-compatible surface."""

    def __init__(self, name: str, base_url: str, path: str, model: str, token: str) -> None:
        self.name = name
        self.path = path
        self.body = {"model": model, "stream": True, "messages": PROMPT}
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        headers = {"authorization": f"Bearer {token}"}
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120, limits=limits)

    async def read(self, tokens: int) -> Read:
        lags: list[float] = []
        first = last = 0.0
        sent = now()
        async with self.http.stream("POST", self.path, json=self.body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                chunk = chat_chunk(line)
                if chunk is None:
                    continue
                kind, text = chunk
                if kind == "done":
                    break
                last = now()
                first = first or last
                lags += [last - float(stamp) for stamp in text.split()]  # the hub may join pieces: one each
        if len(lags) != tokens:
            raise RuntimeError(f"{self.name}: {len(lags)} tokens read, {tokens} sent")
        return Read(first - sent, lags, (tokens - 1) / (last - first) if tokens > 1 and last > first else 0.0)


class Meter:
    """The CPU of the hub, the stand-in and this process, and the machine's busy share, over a stretch."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids

    @contextlib.contextmanager
    def over(self, tally: Tally) -> Iterator[None]:
        before = self._read()
        ticks, started = machine_ticks(), now()
        yield
        tally.wall += now() - started
        for name, seconds in self._read().items():
            tally.cpu[name] = tally.cpu.get(name, 0.0) + seconds - before[name]
        tally.busy.append(100 - shares(ticks, machine_ticks())["idle"])

    def _read(self) -> dict[str, float]:
        """Each process's CPU seconds so far, and the hub's in the kernel (its sockets' reads and writes)."""
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()} | {"hub system": system(self.pids["hub"])}


def system(pid: int) -> float:
    """The system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


async def one_stream(
    standin: StandIn, ways: list[Way], meter: Meter, args: argparse.Namespace, hub_pid: int
) -> dict[str, Tally]:
    """Turns one at a time, the ways alternated (and which goes first), so the machine's load falls on both."""
    direct, hub = ways
    standin.queue(2 * (args.warmup + args.n), args.tokens, 0.0)
    for _ in range(args.warmup):
        await direct.read(args.tokens)
        await hub.read(args.tokens)
    tallies = {way.name: Tally() for way in ways}
    for i in range(args.n):
        for way in ways if i % 2 == 0 else ways[::-1]:
            tally = tallies[way.name]
            with meter.over(tally):
                read = await way.read(args.tokens)
            tally.add(read)
    standin.queue(args.n, 1, 0.0)
    turns = tallies[ONE_TOKEN] = Tally()
    with meter.over(turns):
        for _ in range(args.n):
            turns.add(await hub.read(1))
    if args.profile is not None:
        standin.queue(args.n, 1, 0.0)
        sampling = record(hub_pid, 1 + turns.wall, args.profile / "hub-one-token-turns.txt")
        await asyncio.sleep(1)  # py-spy attached
        for _ in range(args.n):
            await hub.read(1)
        await asyncio.to_thread(sampling.wait)
    return tallies


class Counted:
    """A model turn's sink that only counts its text pieces."""

    def __init__(self) -> None:
        self.pieces = 0

    def add_text(self, delta: str) -> None:
        self.pieces += 1

    def add_reasoning(self, delta: str) -> None:
        pass

    def add_tool_input(self, call_id: str, name: str, delta: str) -> None:
        pass


async def model_client(standin: StandIn, args: argparse.Namespace) -> float:
    """The hub's own model client (`ProviderModel`: pydantic-ai over the openai SDK) in this process, reading turns
    as the one-stream scenario's with nothing else to do: its CPU per token is the hub's model side alone."""
    from elicithub.config import ModelEntry
    from elicithub.runtime.models.seam import ModelRequest, unshown
    from elicithub.runtime.models.streamed import ProviderModel

    os.environ["KEY"] = KEY
    entry = ModelEntry(id="gpt", provider="openai", model="m", base_url=f"{standin.url}/v1", api_key_env="KEY")
    model = ProviderModel(entry)
    request = ModelRequest(messages=[{"role": "user", "content": PROMPT[0]["content"]}], tools=[])
    sink = Counted()
    standin.queue(args.warmup + args.n, args.tokens, 0.0)
    for _ in range(args.warmup):
        await model.turn(request, sink, unshown)
    sink.pieces = 0
    before = time.process_time()
    for _ in range(args.n):
        await model.turn(request, sink, unshown)
    return (time.process_time() - before) / max(sink.pieces, 1)


async def burst(standin: StandIn, way: Way, meter: Meter, args: argparse.Namespace, tally: Tally) -> None:
    """`--streams` streams at once, paced by the stand-in, their starts spread over `--spread` seconds."""
    standin.queue(args.streams, args.tokens, 1 / args.rate)

    async def one(i: int) -> Read:
        await asyncio.sleep(i * args.spread / args.streams)
        return await way.read(args.tokens)

    with meter.over(tally):
        reads = await asyncio.gather(*(one(i) for i in range(args.streams)))
    for read in reads:
        tally.add(read)


async def many_streams(
    standin: StandIn, ways: list[Way], meter: Meter, args: argparse.Namespace, hub_pid: int
) -> dict[str, Tally]:
    standin.queue(2 * args.warmup, args.tokens, 0.0)
    for _ in range(args.warmup):  # a hub's first turn imports pydantic-ai and the openai SDK
        for way in ways:
            await way.read(args.tokens)
    tallies = {way.name: Tally() for way in ways}
    for phase in range(args.phases):
        for way in ways if phase % 2 == 0 else ways[::-1]:
            await burst(standin, way, meter, args, tallies[way.name])
    if args.profile is not None:
        seconds = 1 + args.spread + args.tokens / args.rate + 2
        sampling = record(hub_pid, seconds, args.profile / "hub-many-streams.txt")
        await asyncio.sleep(1)  # py-spy attached
        await burst(standin, ways[1], meter, args, Tally())
        await asyncio.to_thread(sampling.wait)
    return tallies


def table(tallies: dict[str, Tally], direct: str, hub: str) -> None:
    print("| read | turns | first token p50 ms | p95 | token lag p50 ms | p95 | p99 | tokens/s per stream (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in (direct, hub):
        t = tallies[name]
        row = f"| {name} | {t.turns} | {pct(t.firsts, 50):.2f} | {pct(t.firsts, 95):.2f} | "
        rate = statistics.median(t.rates)
        print(row + f"{pct(t.lags, 50):.2f} | {pct(t.lags, 95):.2f} | {pct(t.lags, 99):.2f} | {rate:.1f} |")
    d, h = tallies[direct], tallies[hub]
    added = [pct(h.firsts, 50) - pct(d.firsts, 50), pct(h.firsts, 95) - pct(d.firsts, 95)]
    added += [pct(h.lags, q) - pct(d.lags, q) for q in (50, 95, 99)]
    print("| **added by the hub** | | " + " | ".join(f"**{v:.2f}**" for v in added) + " | |")


def cpu_table(tallies: dict[str, Tally], direct: str, hub: str) -> float:
    """The CPU each process used while each way was read (the readers: this process); returns the hub's CPU per
    relayed token (s). The hub's CPU while the stand-in was read directly is what it had left to do (a run's last
    saves) and its idle work: counted as the relayed tokens' too."""
    print("\n| while reading | tokens | hub CPU s | of it system | stand-in CPU s | readers CPU s | machine busy % |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in (direct, hub):
        t = tallies[name]
        row = f"| {name} | {t.tokens} | {t.cpu['hub']:.3f} | {t.cpu['hub system']:.3f} | {t.cpu['stand-in']:.3f} | "
        print(row + f"{t.cpu['readers']:.3f} | {statistics.mean(t.busy):.0f} |")
    return (tallies[direct].cpu["hub"] + tallies[hub].cpu["hub"]) / max(tallies[hub].tokens, 1)


def report_one(single: dict[str, Tally], alone: float, args: argparse.Namespace) -> None:
    print(f"\n## One stream: {args.tokens} tokens as fast as the stand-in sends them, N = {args.n} each way\n")
    table(single, DIRECT, HUB)
    per_token = cpu_table(single, DIRECT, HUB)
    turn = single[ONE_TOKEN]
    per_turn = turn.cpu["hub"] / max(turn.turns, 1)
    margin = (per_token * args.tokens - per_turn) / max(args.tokens - 1, 1)
    print(
        f"\nhub CPU per relayed token: **{1e6 * per_token:.1f} µs** ({1000 * per_token * args.tokens:.1f} ms per "
        f"turn of {args.tokens}). A turn of one token (N = {turn.turns}): {1000 * per_turn:.2f} ms of hub CPU, "
        f"first token p50 {pct(turn.firsts, 50):.2f} ms; so each token past the first costs the hub "
        f"**{1e6 * margin:.1f} µs**.\nThe hub's model client alone (`ProviderModel.turn` in this process, the same "
        f"turns, N = {args.n}): **{1e6 * alone:.1f} µs** of CPU per token; the rest of the hub's, "
        f"{1e6 * (per_token - alone):.1f} µs per token, is the relay to the reader and the run."
    )


def report_many(several: dict[str, Tally], args: argparse.Namespace) -> None:
    print(
        f"\n## {args.streams} streams at once, {args.tokens} tokens each at {args.rate:g} tokens/s, "
        f"their starts spread over {args.spread:g} s; {args.phases} phase(s) each way, alternated\n"
    )
    table(several, DIRECT, HUB)
    per_token = cpu_table(several, DIRECT, HUB)
    hub = several[HUB]
    print(
        f"\nhub CPU per relayed token: **{1e6 * per_token:.1f} µs** ({hub.tokens} tokens in {hub.turns} turns; "
        f"{100 * hub.cpu['hub'] / hub.wall:.0f} % of a core over the {hub.wall:.1f} s of the phases through it)."
    )


async def measure(standin: StandIn, hub_url: str, hub_pid: int, args: argparse.Namespace) -> None:
    ways = [
        Way(DIRECT, standin.url, "/v1/chat/completions", "m", KEY),
        Way(HUB, hub_url, "/run/v1/chat/completions", "assistant", TOKEN),
    ]
    meter = Meter({"hub": hub_pid, "stand-in": standin.process.pid, "readers": os.getpid()})
    try:
        if "one" in args.scenarios:
            single = await one_stream(standin, ways, meter, args, hub_pid)
            report_one(single, await model_client(standin, args), args)
        if "many" in args.scenarios:
            report_many(await many_streams(standin, ways, meter, args, hub_pid), args)
    finally:
        for way in ways:
            await way.http.aclose()
    if args.profile is not None:
        for name, what in PROFILES.items():
            out = args.profile / name
            if out.exists():
                print(f"\n### Where the hub's CPU went: {what} (py-spy, {out})\n")
                print(summary(out, top=25))


def event_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    """The hub's event loop (uvloop when installed, as `serve` picks it): the model client alone runs as there."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


async def ready(url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{url}/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} is not ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=100, help="one-stream turns each way (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="one-stream turns each way, not counted (default 5)")
    parser.add_argument("--tokens", type=int, default=500, help="tokens per turn (default 500)")
    parser.add_argument("--streams", type=int, default=50, help="streams at once (default 50)")
    parser.add_argument("--rate", type=float, default=50, help="tokens per second per stream (default 50)")
    parser.add_argument("--phases", type=int, default=2, help="phases of many streams each way (default 2)")
    parser.add_argument("--spread", type=float, default=1.0, help="the streams' starts spread over (s, default 1)")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--profile", type=Path, help="sample the hub with py-spy into this folder and summarise")
    parser.add_argument("--scenarios", default="one,many", help="one, many or both (default one,many)")
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)  # py-spy writes nothing without it
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="elicithub-bench-") as tmp, contextlib.ExitStack() as running:
        workdir = Path(tmp)
        standin = StandIn()
        running.callback(standin.close)
        store = f"sqlite:///{workdir / 'hub.db'}" if args.store == "sqlite" else "memory://"
        config: dict[str, Any] = {
            "store": {"url": store},
            "users": [{"id": "alice", "token": TOKEN}],
            "models": [
                {"id": "gpt", "provider": "openai", "model": "m", "base_url": f"{standin.url}/v1", "api_key_env": "KEY"}
            ],
            "model": "gpt",
            "agents": [{"id": "assistant"}],
        }
        hub, port = serve(workdir, "hub", config, env={"KEY": KEY})
        running.callback(stop, hub)
        wait_for_port(port, hub)
        url = f"http://127.0.0.1:{port}"
        asyncio.run(ready(url))
        print(f"stand-in {standin.url}, hub {url} ({args.store} store)", file=sys.stderr, flush=True)
        with asyncio.Runner(loop_factory=event_loop()) as runner:
            runner.run(measure(standin, url, hub.pid, args))
    print(
        f"\n{args.store} store; 1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after. "
        "first token = request sent -> first content chunk read; token lag = a token's chunk read here -> the "
        "stand-in sent it."
    )


if __name__ == "__main__":
    main()
