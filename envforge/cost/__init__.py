"""Prices, the cost ledger and budgets."""
