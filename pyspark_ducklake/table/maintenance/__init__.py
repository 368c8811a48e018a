"""Table maintenance, as DuckDB's functions name it: merging adjacent files (compaction), expiring snapshots and
cleaning up their files (expire), and finding and deleting orphan files (orphans)."""
