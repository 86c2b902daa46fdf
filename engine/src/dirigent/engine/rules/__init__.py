"""The rules: pure decisions over shapes, with no I/O.

Validation of documents against each other and the catalog, trigger rules and progression,
reference resolving, templates, params, schedule firing and apply plans. The store and the
runtime call these; they never call back.
"""
