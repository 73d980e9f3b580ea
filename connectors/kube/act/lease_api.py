"""Read, create and replace one coordination.k8s.io/v1 Lease, with its resourceVersion as the
guard: a replace from a stale read is refused (409), which is how two contenders that read the
same free Lease end with one holder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s

from models import ActuatorSettings

__all__ = ["LeaseApi", "LeaseRecord", "LeaseUnavailable"]


class LeaseUnavailable(Exception):
    """The Lease could not be read or written (no answer, or an unexpected status)."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    version: str
    """metadata.resourceVersion"""
    spec: dict[str, Any]


class LeaseApi:
    def __init__(self, *, api_client: Any, settings: ActuatorSettings) -> None:
        self.api = k8s.CoordinationV1Api(api_client)
        self.namespace = settings.namespace
        self.name = settings.lease_name
        self.timeout = aiohttp.ClientTimeout(total=settings.request_timeout_s)

    def _body(self, spec: dict[str, Any], version: str | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if version is not None:
            metadata["resourceVersion"] = version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    async def _send(self, method: str, *args: Any) -> tuple[int, dict[str, Any]]:
        try:
            response = await getattr(self.api, method)(
                *args, _preload_content=False, _request_timeout=self.timeout
            )
            async with response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LeaseUnavailable(f"no answer: {type(exc).__name__}: {exc}") from exc
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        return status, body

    @staticmethod
    def _refused(status: int, body: dict[str, Any]) -> LeaseUnavailable:
        return LeaseUnavailable(f"HTTP {status}: {str(body.get('message') or '')[:300]}")

    async def read(self) -> LeaseRecord | None:
        status, body = await self._send("read_namespaced_lease", self.name, self.namespace)
        if status == 404:
            return None
        if status != 200:
            raise self._refused(status, body)
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return LeaseRecord(version=version, spec=dict(body.get("spec") or {}))

    async def create(self, spec: dict[str, Any]) -> bool:
        status, body = await self._send("create_namespaced_lease", self.namespace, self._body(spec))
        if status == 409:  # AlreadyExists: another contender created it first
            return False
        if status not in (200, 201):
            raise self._refused(status, body)
        return True

    async def replace(self, version: str, spec: dict[str, Any]) -> bool:
        status, body = await self._send(
            "replace_namespaced_lease", self.name, self.namespace, self._body(spec, version)
        )
        if status == 409:  # Conflict: written since our read
            return False
        if status != 200:
            raise self._refused(status, body)
        return True
