"""Triggers: the places that need a person's input and ask the broker for it."""
