"""core.graph"""
