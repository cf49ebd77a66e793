"""Whole processes end to end: replication, persistence, faults, the collector."""
