"""Native builds: the C compiler, the C shims and struct reader, the C draw hook, Rust crates."""
