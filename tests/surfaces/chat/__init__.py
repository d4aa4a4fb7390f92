"""Tests of the chat surface."""
