"""Block digests of canonical states (numpy, and the same digests computed in C)."""
