"""blender"""
