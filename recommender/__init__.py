"""`kerf recommend`: kerf's own recommendation source, computed from Prometheus history."""
