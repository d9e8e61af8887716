"""Batch porting jobs: a manifest, a job store, one budget, local and Ray executors, reports."""
