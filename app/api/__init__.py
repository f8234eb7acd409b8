"""JSON API for the mobile client, mounted under /api/v1."""
