"""Clients of the hub: the terminal prompt and chat (the web widget's static files live in web/)."""
