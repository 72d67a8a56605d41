"""The fuzz tier: property-based tests over every parser of values read from the cluster.

Each parser gets hostile values (:mod:`tests.fuzz.hostile`: deep nesting, huge strings, wrong types, lone
surrogates, control characters) and must return a value or its "absent/invalid" answer, never raise anything
else. One package, not files beside each module's tests: the hostile strategies are shared, and the tier runs
on its own (``pytest tests/fuzz``) in seconds, in process (a bounded number of examples each, no deadline).
File names say the module they cover.
"""
