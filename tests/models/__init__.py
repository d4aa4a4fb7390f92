"""Stand-ins of the model providers' APIs: see `standins.py`."""
