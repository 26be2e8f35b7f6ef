"""Gradient rules of the conv op family."""
