"""Table operations on top of the catalog and Parquet layers: scans, appends, deletes, schema evolution."""
