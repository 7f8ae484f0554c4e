"""Validating calls against tool definitions: shapes, defaults, problems, retry messages."""
