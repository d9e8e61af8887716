"""Backends: one module per runtime, each yields a Driver over canonical state."""
