"""assignadd.hypotheses."""
