"""Gradient rules of the random op family."""
