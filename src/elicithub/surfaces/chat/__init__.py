"""The chat surfaces: a run streamed as OpenAI SSE, as the AI SDK UI message stream, and as AG-UI events."""

AGUI_PATHS = ("/run/agui", "/run/agui/{agent}")
"""AG-UI's routes: the default agent, and the one named."""
