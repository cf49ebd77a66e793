"""Tests of pyrepl's parts in-process (sans-io cores, readers, encoders, state machines)."""
