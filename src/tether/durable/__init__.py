"""Running agents on a durable workflow engine: `tether.durable.dbos` (extra `tether[dbos]`)."""
