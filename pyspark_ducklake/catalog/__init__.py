"""The DuckLake format and its commit protocol: the only package that runs SQL or imports sqlalchemy. Never imports
pyspark."""
