"""Checks of the from-scratch oracles themselves (hand-worked examples and algebraic laws)."""
