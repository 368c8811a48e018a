"""What the Spark wings (batch/ and streaming/) share: the type mapping, the lake settings from options and conf,
the change feed's partitions, and the guard over a job's tasks. Imports pyspark; never imports batch/ or streaming/."""
