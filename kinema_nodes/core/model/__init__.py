"""core.model"""
