"""The maintenance policy: calendar windows, blackouts and the freeze switch (docs/maintenance-policy.md).

``recurrence`` (RRULE windows), ``blackout`` and ``freeze`` are values; ``maintenance`` combines windows and
blackouts; ``document`` parses the policy ConfigMap; ``source`` watches it; ``writer`` writes the freeze into
it (``pykured freeze`` itself is :mod:`pykured.fleet.freeze`).
"""
