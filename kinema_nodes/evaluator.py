"""Runs a Kinema node tree: snapshot to a GraphSpec, compile on change, run each frame."""
