"""Append-only file persistence (Redis 7's multi-part AOF)."""
