"""Prompt templates (jinja2) and the code that fills them."""
