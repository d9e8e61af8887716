"""envforge: port slow RL environments to fast JAX or Rust, and prove the port is the same env."""

__version__ = "0.1.0"
