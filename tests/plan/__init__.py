"""Tests of the plan layer: the lowering against the from-scratch plan evaluator."""
