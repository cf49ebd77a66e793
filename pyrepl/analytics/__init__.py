"""Sync analytics: the PySpark job behind ``pyrepl metrics``.

Theory of operation: ``job`` turns sync-event logs (the schema of ``pyrepl.events``) into
per-sync, per-recovery, per-link, per-node and per-bucket tables and the summary; ``report``
writes them (Parquet, summary.json, PNG charts, report.html); ``session`` builds the
SparkSession; ``synth`` generates synthetic fleet logs; ``submit`` is the spark-submit entry.
Importing this package imports nothing heavy: pyspark and matplotlib load only when used.
"""
