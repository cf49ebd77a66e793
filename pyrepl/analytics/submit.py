"""The ``spark-submit`` entry point of ``pyrepl metrics`` (same arguments).

Theory of operation: spark-submit starts the JVM with its master and ``--conf`` settings and
runs this file with the driver's Python; the command then finds the JVM already there
(``PYSPARK_GATEWAY_PORT``) and uses it as is. The job has no Python UDFs, so executors need only
Java. Example (a standalone master)::

    PYSPARK_PYTHON=.venv/bin/python spark-submit --master spark://HOST:7077 \\
        --conf spark.driver.memory=1g --conf spark.executor.memory=1g \\
        "$(.venv/bin/python -c 'import pyrepl.analytics.submit as s; print(s.__file__)')" \\
        LOGS... --out DIR
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from pyrepl.cli.metrics import metrics

    metrics.main(args=sys.argv[1:] if argv is None else argv, prog_name="pyrepl metrics")


if __name__ == "__main__":
    main()
