"""assignadd.tests."""
