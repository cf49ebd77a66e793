#!/usr/bin/env bash
# The system side of the Spark analytics (pyrepl metrics, tests/analytics): a Java 17+ runtime
# for PySpark 4. Installs Debian's openjdk-17-jre-headless only when no suitable `java` is on
# PATH (a JAVA_HOME with bin/java 17+ counts too); pyspark and matplotlib come from pip (the
# `spark` extra).
set -euo pipefail

java_major() {  # prints the major version of the java given as $1, or nothing
  "$1" -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

for j in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null || true)"; do
  if [ -n "$j" ] && [ -x "$j" ]; then
    major="$(java_major "$j")"
    if [ -n "$major" ] && [ "$major" -ge 17 ]; then
      exit 0
    fi
  fi
done

bash "$(dirname "$0")/apt-install.sh" "PySpark needs Java 17+" openjdk-17-jre-headless
java -version 2>&1 | head -1 >&2
