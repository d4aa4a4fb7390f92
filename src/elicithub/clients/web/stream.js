// Reads an SSE response body event by event: `data:` lines make up an event, comment lines (`: keep-alive`)
// are ignored, and `[DONE]` ends the stream. Each JSON payload goes to `onPart` as soon as it arrives.

export async function readParts(response, onPart) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  const dispatch = () => {
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
      }
      // Comment lines (":"), and event/id/retry fields, carry nothing for us.
    }
    if (done) {
      dispatch();
      return undefined;
    }
  }
}
