"""The DuckLake format and its commit protocol. Never imports pyspark."""
