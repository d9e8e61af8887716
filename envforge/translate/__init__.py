"""`envforge translate`: the translate → verify → repair (and optimize) orchestration."""
