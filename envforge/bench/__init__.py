"""Throughput benchmarks: references and ports stepped side by side, with an honest ceiling."""
