"""Vocabulary every package shares: pykured's exception tree (``errors``) and the reasons decisions carry
(``model``). Standard library only, no I/O.
"""
