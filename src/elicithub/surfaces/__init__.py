"""Surfaces: the wire formats that carry a run's stream to a person's client."""
