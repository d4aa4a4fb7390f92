"""Tests of the a2a surface."""
