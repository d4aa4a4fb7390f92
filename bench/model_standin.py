"""The model stand-in (tests/models/standins.py) in a process of its own, so that its CPU is not the hub's: OpenAI
chat completions streams whose every token is the time the stand-in sent it, for model_stream.py.

Run:  python bench/model_standin.py
It prints its base URL once it listens; then each line `N TOKENS DELAY_S` on its stdin queues N replies of TOKENS
tokens, DELAY_S apart (the stand-in's `delay_s`), and it prints `queued`. It stops at the end of its stdin.

A token is `time.monotonic()` when its chunk was made, just before it is written (`12345.678901 `): Linux's
monotonic clock is the machine's, so a reader in another process takes its own `time.monotonic()` on receipt and
the difference is the token's way from the stand-in to it, through the hub or not.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the `tests` package

from tests.models import standins
from tests.models.openai_wire import OpenAIWire
from tests.models.script import Content, Text


class StampedWire(OpenAIWire):
    """OpenAI's wire format, each text step's text replaced by the moment it is sent."""

    def content(self, step: Content) -> list[str]:
        if isinstance(step, Text):
            step = Text(f"{time.monotonic():.6f} ")
        return super().content(step)


def main() -> None:
    standins.WIRES["openai"] = StampedWire  # this process's stand-in only
    with standins.ModelStandIn() as standin:
        print(standin.url, flush=True)
        for line in sys.stdin:
            n, tokens, delay_s = line.split()
            steps = [Text("")] * int(tokens)
            for _ in range(int(n)):
                standin.reply(*steps, delay_s=float(delay_s))
            print("queued", flush=True)


if __name__ == "__main__":
    main()
