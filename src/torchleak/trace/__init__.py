"""The trace file: schema, writer and reader."""
