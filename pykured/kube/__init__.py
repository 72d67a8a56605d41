"""The Kubernetes API: ``client`` (the only importer of the Kubernetes client library), ``node`` (a Node as
pykured reads it, and RFC 3339 times), ``events`` (Events on the Node) and ``taints`` (the PreferNoSchedule
taint). This package file imports nothing, so reading a Node view never loads the client library.
"""
