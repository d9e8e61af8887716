"""`envforge init`: draft an env.toml spec (and README) from a reference by probing it live."""
