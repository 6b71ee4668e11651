"""Replaying a bounded slice of a topic under its own consumer group, resumably."""
