"""Plain HTTP to the real kube-apiserver for the chart tests: create (or server-side dry-run)
any rendered object by finding its resource through discovery, read it back, and ask
SubjectAccessReviews. kubectl is not installed here; the API is all it would use."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

from tests.local_apiserver import ApiServer

WAIT_S = 60.0
"""A CRD is served within a second or two of its creation; 60 s for a busy 2-core CI."""


class Kube:
    """A system:masters client of the local API server (apiserver.sh's token)."""

    def __init__(self, apiserver: ApiServer) -> None:
        self.url = apiserver.url
        self.token = apiserver.token
        self.tls = ssl.create_default_context(cafile=str(apiserver.ca_cert))
        self._resources: dict[str, list[dict[str, Any]]] = {}

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, context=self.tls, timeout=30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, _body(e.read())

    def _discover(self, api_version: str) -> list[dict[str, Any]]:
        if api_version not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            status, body = self.call("GET", base)
            assert status == 200, f"discovery of {api_version}: {status} {body}"
            self._resources[api_version] = body["resources"]
        return self._resources[api_version]

    def collection(self, obj: dict[str, Any]) -> str:
        """The collection path an object is created in, from the server's own discovery."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        found = [
            r for r in self._discover(api_version) if r["kind"] == kind and "/" not in r["name"]
        ]
        assert found, f"the API server serves no {kind} in {api_version}"
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if found[0]["namespaced"]:
            namespace = obj["metadata"].get("namespace")
            assert namespace, f"{kind}/{obj['metadata']['name']} has no metadata.namespace"
            return f"{base}/namespaces/{namespace}/{found[0]['name']}"
        return f"{base}/{found[0]['name']}"

    def create(self, obj: dict[str, Any], *, dry_run: bool) -> tuple[int, dict[str, Any]]:
        query = "?dryRun=All&fieldValidation=Strict" if dry_run else "?fieldValidation=Strict"
        return self.call("POST", self.collection(obj) + query, obj)

    def read(self, obj: dict[str, Any]) -> dict[str, Any]:
        status, body = self.call("GET", f"{self.collection(obj)}/{obj['metadata']['name']}")
        assert status == 200, f"read {obj['kind']}/{obj['metadata']['name']}: {status} {body}"
        return body

    def delete(self, obj: dict[str, Any]) -> None:
        self.call("DELETE", f"{self.collection(obj)}/{obj['metadata']['name']}")

    def ensure(self, obj: dict[str, Any]) -> None:
        """Create unless it exists already (the session's server is shared between tests)."""
        status, body = self.create(obj, dry_run=False)
        assert status in (200, 201, 409), f"create {obj['kind']}: {status} {body}"

    def namespace(self, name: str) -> None:
        self.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def install_crds(self, crds: list[dict[str, Any]]) -> None:
        """Create the CRDs and wait until the API server serves each of their kinds."""
        for crd in crds:
            self.ensure(crd)
        deadline = time.monotonic() + WAIT_S
        wanted = {
            (f"{c['spec']['group']}/{v['name']}", c["spec"]["names"]["plural"])
            for c in crds
            for v in c["spec"]["versions"]
            if v.get("served")
        }
        while True:
            missing = {
                (gv, plural)
                for gv, plural in wanted
                if plural not in {r["name"] for r in self._served(gv)}
            }
            if not missing:
                return
            assert time.monotonic() < deadline, f"CRDs not served within {WAIT_S} s: {missing}"
            time.sleep(0.2)

    def _served(self, group_version: str) -> list[dict[str, Any]]:
        status, body = self.call("GET", f"/apis/{group_version}")
        return body.get("resources", []) if status == 200 else []

    def can(self, service_account: tuple[str, str], **attributes: str) -> bool:
        """Whether the ServiceAccount (namespace, name) may do what resourceAttributes say
        (verb, group, resource, subresource, namespace, name), per the server's authorizer."""
        namespace, name = service_account
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{name}",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": attributes,
            },
        }
        status, body = self.call(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
        )
        assert status == 201, f"SubjectAccessReview: {status} {body}"
        return bool(body["status"].get("allowed"))


def _body(raw: bytes) -> dict[str, Any]:
    """An error's body: the API's Status object, or its text where the server gave plain text
    (a group not served yet answers "404 page not found", which `install_crds` polls through
    while a CRD is being established: a CI run under load got there first and failed)."""
    try:
        parsed = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return {"message": raw.decode(errors="replace")}
    return parsed if isinstance(parsed, dict) else {"message": parsed}
