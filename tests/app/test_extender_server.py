"""`gpufrag extender`'s HTTP side over real HTTP, fed the requests a real kube-scheduler sent
(tests/connectors/kube/fixtures/extender), in the order it sent them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from connectors.kube.extender import wire
from connectors.kube.extender.binder import BindError
from connectors.kube.extender.wire import BindingArgs
from models import AnalysisSettings, Node, PodPhase, TaskProfile
from models.cards import SharingMode
from models.settings import GuardrailSettings
from streams.app.extender.server import ExtenderServer
from streams.cluster.view import ClusterView
from streams.extender.assumed import AssumeCache
from streams.extender.scores import make_scorer
from streams.extender.verbs import Extender
from streams.profiles.join import node_profile, task_profile
from tests.ports import free_port

FIXTURES = Path(__file__).parents[1] / "connectors" / "kube" / "fixtures" / "extender"
T0 = datetime(2026, 12, 7, tzinfo=UTC)


class FollowingView:
    """The view as the watch would keep it: the three nodes the scheduler saw (4 whole cards
    each), pods appearing bound where the extender bound them, victims leaving."""

    NODES = ("node-a", "node-b", "node-c")

    def __init__(self) -> None:
        self.view = ClusterView(settings=AnalysisSettings(), typical=None)
        self.pending: dict[str, TaskProfile] = {}
        self._refresh()

    def _refresh(self) -> None:
        for name in self.NODES:
            node = Node(
                name=name,
                cpu_milli=8_000,
                memory_mib=32_768,
                gpu_model="T4",  # the captured nodes name none; any model does here
                gpu_count=4,
                gpu_sharing=SharingMode.EXCLUSIVE,
            )
            held = [t for t in self.view.tasks.values() if t.node == name]
            self.view.put_node(name, node_profile(node, held, {}, at=T0))

    def bound(self, task: TaskProfile, node: str, cards: tuple[int, ...]) -> None:
        update = {"node": node, "phase": PodPhase.RUNNING, "gpu_indices": cards}
        self.view.put_task(task.key, task.model_copy(update=update))
        self._refresh()

    def deleted(self, uids: set[str]) -> None:
        for key in [k for k, t in self.view.tasks.items() if t.uid in uids]:
            self.view.put_task(key, None)
        self._refresh()


class RecordingBinder:
    """Stands in for the API server's Binding (the scheduler test binds for real), and shows
    the binding in the view as the watch would."""

    def __init__(self, follow: FollowingView | None = None, *, refuse: bool = False) -> None:
        self.calls: list[tuple[BindingArgs, tuple[int, ...]]] = []
        self.refuse = refuse
        self.follow = follow

    async def bind(self, args: BindingArgs, *, cards: tuple[int, ...]) -> None:
        self.calls.append((args, cards))
        if self.refuse:
            raise BindError('409 pods "x" is already assigned to node "n"')
        if self.follow is not None:
            self.follow.bound(self.follow.pending[args.key], args.node, cards)


async def serving(server: ExtenderServer) -> AsyncIterator[str]:
    runner = web.AppRunner(server.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def make_server(
    binder: RecordingBinder, *, ready: bool = True, follow: FollowingView | None = None
) -> ExtenderServer:
    follow = follow or FollowingView()
    server = ExtenderServer(
        Extender(scorer=make_scorer("fgd", seed=0), assumed=AssumeCache(ttl_s=60)),
        view=lambda: follow.view,
        ready=lambda: ready,
        binder=binder,
        guardrails=GuardrailSettings(),
        registry=CollectorRegistry(),
    )
    return server


@pytest.mark.parametrize("form", ["node-cache-true", "node-cache-false"])
async def test_the_captured_session_is_answered_in_the_schedulers_types(form: str) -> None:
    follow = FollowingView()
    binder = RecordingBinder(follow)
    proposed: dict[str, set[str]] = {}
    async for base in serving(make_server(binder, follow=follow)):
        async with aiohttp.ClientSession() as http:
            for path in sorted((FIXTURES / form).glob("*.json")):
                verb = path.stem.split("-", 1)[1]
                sent = orjson.loads(path.read_bytes())
                if verb == "bind":
                    # the scheduler deleted the victims on the node it then bound to, and
                    # the watch showed them gone
                    follow.deleted(proposed.pop(sent["Node"], set()))
                if verb in ("filter", "preempt"):
                    pod = (
                        wire.extender_args(path.read_bytes(), now=T0).pod
                        if verb == "filter"
                        else wire.preemption_args(path.read_bytes(), now=T0).pod
                    )
                    follow.pending[pod.key] = task_profile(pod, None, at=T0)
                async with http.post(f"{base}/{verb}", data=path.read_bytes()) as r:
                    assert r.status == 200, await r.text()
                    assert r.content_type == "application/json"
                    answer = orjson.loads(await r.read())
                if verb == "filter":
                    asked = sent["NodeNames"] or [
                        n["metadata"]["name"] for n in sent["Nodes"]["items"]
                    ]
                    kept = (
                        answer["NodeNames"]
                        if form == "node-cache-true"
                        else [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
                    )
                    assert set(kept) | set(answer["FailedNodes"]) | set(
                        answer["FailedAndUnresolvableNodes"]
                    ) == set(asked)
                    assert answer["Error"] == ""
                elif verb == "prioritize":
                    asked = sent["NodeNames"] or [
                        n["metadata"]["name"] for n in sent["Nodes"]["items"]
                    ]
                    assert [h["Host"] for h in answer] == asked
                    assert all(0 <= h["Score"] <= 10 for h in answer)
                elif verb == "bind":
                    assert answer == {"Error": ""}
                    args, _ = binder.calls[-1]
                    assert (args.pod_name, args.node) == (sent["PodName"], sent["Node"])
                else:
                    assert set(answer) == {"NodeNameToMetaVictims"}
                    proposed = {
                        node: {p["UID"] for p in v["Pods"]}
                        for node, v in answer["NodeNameToMetaVictims"].items()
                    }
    binds = sorted((FIXTURES / form).glob("*-bind.json"))
    assert len(binder.calls) == len(binds)


async def test_a_refused_binding_is_said_in_the_error_field_and_frees_the_cards() -> None:
    binder = RecordingBinder(refuse=True)
    server = make_server(binder)
    path = FIXTURES / "node-cache-true"
    async for base in serving(server):
        async with aiohttp.ClientSession() as http:
            await http.post(f"{base}/filter", data=(path / "001-filter.json").read_bytes())
            async with http.post(f"{base}/bind", data=(path / "003-bind.json").read_bytes()) as r:
                answer = orjson.loads(await r.read())
    assert r.status == 200 and "already assigned" in answer["Error"]
    assert binder.calls[0][1] == (0,)  # the pod's card was chosen, then given back
    assert len(server.extender.assumed) == 0


async def test_a_request_that_is_not_the_protocol_is_a_400_with_the_reason() -> None:
    async for base in serving(make_server(RecordingBinder())):
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{base}/filter", data=b'{"NodeNames": []}') as r,
        ):
            assert r.status == 400
            assert "no Pod" in await r.text()


async def test_before_the_view_is_settled_every_node_passes_unscored() -> None:
    binder = RecordingBinder()
    path = FIXTURES / "node-cache-true" / "007-filter.json"  # the four-card pod
    async for base in serving(make_server(binder, ready=False)):
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{base}/filter", data=path.read_bytes()) as r,
        ):
            answer = orjson.loads(await r.read())
    assert answer["NodeNames"] == orjson.loads(path.read_bytes())["NodeNames"]
    assert answer["FailedNodes"] == {}
