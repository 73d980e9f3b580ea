"""The binding an extender with a bind verb creates itself (kube-scheduler then runs no binder
of its own for the pod), after recording the cards it chose on the pod.

The annotation goes first: once the binding is stored the pod is bound, and a watcher (this
process's, or a device plugin's) must find the cards on it by then. Both calls are read raw
(``_preload_content=False``): the generated client cannot decode a Binding's reply (it
requires ``target`` in the Status it gets back).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from connectors.kube.extender.wire import BindingArgs
from connectors.kube.gpu.resource_names import GPU_INDICES, HAMI_NODE

__all__ = ["BindError", "Binder"]


class BindError(Exception):
    """The API server refused or did not answer: said to the scheduler, which retries."""


def _reason(exc: ApiException) -> str:
    try:
        body = orjson.loads(exc.body or b"{}")
    except orjson.JSONDecodeError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"{exc.status} {message or exc.reason}"[:300]


class Binder:
    def __init__(self, api: Any, *, timeout_s: float) -> None:
        """``api``: a kubernetes-asyncio ApiClient (the caller closes it)."""
        self._core: Any = k8s.CoreV1Api(api)  # raw replies: the generated types do not apply
        self._timeout_s = timeout_s

    async def bind(self, args: BindingArgs, *, cards: tuple[int, ...]) -> None:
        try:
            if cards:
                patch: dict[str, dict[str, Any]] = {
                    "metadata": {
                        "annotations": {
                            GPU_INDICES: ",".join(str(c) for c in cards),
                            HAMI_NODE: args.node,
                        }
                    }
                }
                if args.uid:  # only the pod the scheduler decided for, not a namesake
                    patch["metadata"]["uid"] = args.uid
                reply = await self._core.patch_namespaced_pod(
                    args.pod_name,
                    args.namespace,
                    patch,
                    _content_type="application/merge-patch+json",
                    _preload_content=False,
                    _request_timeout=self._timeout_s,
                )
                reply.release()
            meta: dict[str, Any] = {"name": args.pod_name, "namespace": args.namespace}
            if args.uid:
                meta["uid"] = args.uid
            reply = await self._core.create_namespaced_binding(
                args.namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": meta,
                    "target": {"apiVersion": "v1", "kind": "Node", "name": args.node},
                },
                _preload_content=False,
                _request_timeout=self._timeout_s,
            )
            reply.release()
        except ApiException as exc:
            raise BindError(_reason(exc)) from None
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            raise BindError(f"no answer from the API server: {exc!r}"[:300]) from None
