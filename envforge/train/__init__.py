"""Training on ports: PPO fused in JAX (``ppo.py``), its host-loop twin (``host_ppo.py``) and
evaluation on any Driver (``evaluate.py``); L4's equivalence statistics are in ``envforge/verify/stats.py``."""
