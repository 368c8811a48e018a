"""Storage and Parquet: no pyspark, no SQL."""
