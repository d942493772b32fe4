"""Exporters: one module per runtime, each taking a built model and writing one file atomically."""
