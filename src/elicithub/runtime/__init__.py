"""The agent run loop and the model adapters it talks to."""
