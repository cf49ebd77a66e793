"""The Spark analytics (pyrepl metrics) and the oracle they are checked against."""
