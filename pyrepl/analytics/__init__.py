"""Sync analytics: the PySpark job behind ``pyrepl metrics``.

Theory of operation: ``job.run`` orchestrates the steps, each a function from DataFrames to a
DataFrame in a module named for what it builds: ``read`` (logs -> classified rows, the one
aggregation pass, the Parquet conversion), ``syncs``, ``recoveries``, ``lag``, ``tables``
(per link, node, bucket), ``summary`` and ``stats`` (summary.json), ``advice`` (backlog
sizing); ``driver`` does the same steps in plain Python when what the input pass left is
small (the usual case). ``report`` writes the results (Parquet, summary.json, PNG charts, report.html);
``session`` builds the SparkSession; ``submit`` is the spark-submit entry. The synthetic fleet
generator the tests and benchmarks use lives in tests/analytics/synth.py.
Importing this package imports nothing heavy: pyspark and matplotlib load only when used.
"""
