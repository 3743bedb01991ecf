"""The store: DuckDB schema, writer and readers shared by every part."""
