"""Table operations on top of the catalog and Parquet floors, no Spark: scans, data files, deletes, commits of them,
the target table of a write, the sink's micro-batch, flush, schema evolution, the change feed and maintenance."""
