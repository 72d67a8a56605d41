"""Vocabulary every package shares: pykured's exception tree (``errors``) and the reasons decisions carry
(``model``), the one RFC 3339 parser (``times``) and the one bounded JSON decoder of values read from the
cluster (``boundedjson``). Standard library only, no I/O.
"""
