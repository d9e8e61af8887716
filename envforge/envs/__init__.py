"""Verified ports as environments for training code: gymnax's API and gymnasium's vector envs."""
