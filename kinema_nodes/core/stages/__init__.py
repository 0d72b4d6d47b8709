"""core.stages"""
