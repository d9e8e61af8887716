"""The translate → verify → repair orchestration."""
