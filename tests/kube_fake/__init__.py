"""A fake Kubernetes API server for tests: real HTTP, the real list/watch protocol."""

from tests.kube_fake.cluster import FakeCluster
from tests.kube_fake.server import FakeApiServer, RequestRecord
from tests.ports import free_port

__all__ = ["FakeApiServer", "FakeCluster", "RequestRecord", "free_port"]
