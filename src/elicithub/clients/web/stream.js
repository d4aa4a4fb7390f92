// Reads an SSE response body event by event: `data:` lines make up an event, comment lines (`: keep-alive`)
// are ignored, and `[DONE]` ends the stream. Each JSON payload goes to `onPart` as soon as it arrives, and
// `position.lastEventId` follows the `id:` of the events read, so a dropped stream can resume after it.

export async function readParts(response, onPart, position = {}) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  let id = null;
  const dispatch = () => {
    // As in EventSource, an event's id counts once the event is complete, not when its line arrives.
    if (id !== null) position.lastEventId = id;
    id = null;
    const payload = data.join("\n");
    data = [];
    if (payload === "") return true;
    if (payload === "[DONE]") return false;
    let part;
    try {
      part = JSON.parse(payload);
    } catch {
      return true; // not ours to understand; a reader passes what it cannot read
    }
    onPart(part);
    return true;
  };
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value ?? new Uint8Array(), { stream: !done });
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = done ? "" : lines.pop();
    for (const line of lines) {
      if (line === "") {
        if (!dispatch()) return reader.cancel();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      } else if (line.startsWith("id:") && !line.includes("\0")) {
        id = line.slice(3).replace(/^ /, "");
      }
      // Comment lines (":"), and event/retry fields, carry nothing for us.
    }
    // As in EventSource, an event cut off before its blank line is dropped: a resumed stream sends it again.
    if (done) return undefined;
  }
}
