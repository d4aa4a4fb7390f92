"""A task's answer artifact as its run's text streams, for a client that reads the task as a stream
(`SendStreamingMessage`, A2A 0.3's `message/stream`): artifact updates that append, then the answer whole."""

from __future__ import annotations

from a2a.helpers import new_text_part
from a2a.server.tasks import TaskUpdater

from elicithub.core.events import RunPaused, StreamEvent, TextDelta, ToolCallFinished
from elicithub.surfaces.pacing import Pacer

ANSWER = "answer"
"""The answer artifact's id and name: one per task, so chunks of it sent in one request and those of the next (the
run resumed after an answer) are the same artifact."""

CHUNK_INTERVAL_S = 0.05
"""Text that streams within this long of the last chunk goes in the next one: each chunk is saved with the task (the
SDK stores the task at each event), so the model's every token is not a write."""


class StreamedAnswer:
    """The run's last words (its text after its last tool call) as they stream, in the artifact `answer`: a
    stretch's first chunk replaces what the artifact held (`append: false`), later ones append to it (`append:
    true`). A tool call's end starts the answer again. `finish` sends what is left as a chunk, then the answer whole
    (`append: false, lastChunk: true`): the chunks alone are the text, and a client that follows A2A's append rule,
    like the stored task, ends with it in one part, as a task answered without streaming has it."""

    def __init__(self, updater: TaskUpdater, interval_s: float | None = None) -> None:
        self.updater = updater
        self.text = ""
        self.sent = 0
        """How much of `text` went out in chunks."""
        self.started = False
        """Whether this request sent any of the answer."""
        self.pacer = Pacer(self._send, CHUNK_INTERVAL_S if interval_s is None else interval_s)

    async def seen(self, event: StreamEvent) -> None:
        """The run's next event (`PauseDriver.follow`'s `seen`)."""
        if isinstance(event, TextDelta):
            self.text += event.text
            self.pacer.more()
        elif isinstance(event, ToolCallFinished):
            await self.flush()
            self.text, self.sent = "", 0  # what was said before the call was not the run's last word
        elif isinstance(event, RunPaused):
            await self.flush()  # before the pause's status: the stream ends with it

    async def flush(self) -> None:
        """Send what is held, after any chunk under way."""
        await self.pacer.stop()
        await self._send()

    async def finish(self, text: str) -> None:
        """The run ended with `text` as its last words: the artifact is that, whole, and complete."""
        await self.flush()
        await self.updater.add_artifact(
            [new_text_part(text)], artifact_id=ANSWER, name=ANSWER, append=False, last_chunk=True
        )

    def cancel(self) -> None:
        self.pacer.cancel()

    async def _send(self) -> None:
        piece = self.text[self.sent :]
        if not piece:
            return
        await self.updater.add_artifact([new_text_part(piece)], artifact_id=ANSWER, name=ANSWER, append=self.sent > 0)
        self.sent += len(piece)
        self.started = True
