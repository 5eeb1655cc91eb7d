"""assignadd.interventions."""
