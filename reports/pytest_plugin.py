"""pytest plugin (filled in by the verify issue)."""
