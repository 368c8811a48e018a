"""Helpers shared by the test folders: catalog locations, DuckDB with the DuckLake extensions, test data."""
