"""Training on ports: PPO fused in JAX (``ppo.py``), its host-loop twin (``host_ppo.py``),
evaluation on any Driver (``evaluate.py``) and the equivalence statistics L4 uses (``stats.py``)."""
