"""Sandboxes for commands the agent runs."""
