"""Formats: one tool per string format and pattern the runtime validates."""
