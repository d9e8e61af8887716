"""Reference coverage: which lines and branches of the reference a stretch of verification ran."""
