"""The chat surfaces: a run streamed as OpenAI SSE, as the AI SDK UI message stream, and as AG-UI events."""
