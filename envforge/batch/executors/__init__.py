"""Where batch jobs run: threads of this process (local) or tasks on a Ray cluster (ray)."""
