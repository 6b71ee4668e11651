"""The read path: the fan-out reader, its plans, range paging and ordered merge."""
