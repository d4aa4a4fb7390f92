"""Tests of the pages the hub hosts."""
