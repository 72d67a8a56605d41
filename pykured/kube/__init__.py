"""The Kubernetes API: ``api`` (``KubeApi``, the calls pykured's parts make on their client), ``client`` (the
only importer of the Kubernetes client library; the HTTP client that implements ``KubeApi``), ``node`` (a Node
as pykured reads it, and RFC 3339 times), ``events`` (Events on the Node) and ``taints`` (the PreferNoSchedule
taint). This package file imports nothing, so reading a Node view never loads the client library.
"""
