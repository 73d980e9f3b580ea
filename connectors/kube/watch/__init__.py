"""Watching: Kubernetes objects into events. One list+watch reflector per resource, the
handlers and mappers that turn pods, nodes, quota and queue objects and Events into models, and
a saved ``kubectl get`` snapshot read with the same mappings."""
