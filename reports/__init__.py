"""assignadd.reports."""
