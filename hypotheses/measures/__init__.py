"""Measurements shared by hypotheses and reports: each a function of a model (and tokens), no verdicts."""
