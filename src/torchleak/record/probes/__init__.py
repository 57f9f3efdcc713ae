"""Probes: each measures one thing and never raises into the user's training loop."""
