"""redis-py against a pyrepl process."""
