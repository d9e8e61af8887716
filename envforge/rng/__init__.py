"""Randomness inside ``step``: the draw log (tape), its recorders and the JAX draws interface."""
