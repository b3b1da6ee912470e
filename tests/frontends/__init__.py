"""Tests of the front-ends (languages compiled to plans)."""
