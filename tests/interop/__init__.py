"""pyrepl beside a real redis-server: replies compared, replication both ways."""
