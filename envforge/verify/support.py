"""Kept only for ``envforge/mutate/differential.py`` (edited on another branch while this
moved): the support test is in ``envforge/stats.py`` with the other statistics. Remove once
mutate imports it from there."""

from envforge.stats import support_pvalue

__all__ = ["support_pvalue"]
