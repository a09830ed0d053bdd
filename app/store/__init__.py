"""The cluster view: the objects decisions read, kept in memory and indexed, and what feeds
it offline (a state directory of YAML).

Imports `app.runtime` and `app.model`.
"""
