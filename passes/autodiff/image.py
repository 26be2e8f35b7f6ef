"""Gradient rules of the image op family."""
