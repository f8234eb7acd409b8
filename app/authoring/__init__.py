"""Authoring: what instructors make from the cards (exports ...)."""
