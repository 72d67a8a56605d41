"""Vocabulary every package shares: pykured's exception tree (``errors``) and the reasons decisions carry
(``model``), the one RFC 3339 parser (``times``), the one bounded JSON decoder of values read from the
cluster (``boundedjson``) and the one sanitiser of text a command prints (``printable``). Standard library
only, no I/O.
"""
