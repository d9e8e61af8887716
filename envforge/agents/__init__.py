"""Model providers, workspace tools and the agent loop."""
