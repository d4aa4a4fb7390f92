"""The A2A surface: the hub serving its agents to A2A clients, with their agent cards and tasks."""
