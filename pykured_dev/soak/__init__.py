"""The soak: pykured's promises checked from the API server's history under faults (see ``scenario``)."""
