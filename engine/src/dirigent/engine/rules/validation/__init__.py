"""Validation beyond shape: what needs the whole document, or several documents, to decide."""
