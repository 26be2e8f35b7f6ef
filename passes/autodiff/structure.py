"""Gradient rules of the structure op family."""
