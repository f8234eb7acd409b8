"""Spaced review of mistakes with fresh numbers (FSRS)."""
