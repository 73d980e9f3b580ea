"""The worker's flow control keeps what the agents have queued when the flow is resumed while
it is already running (Faust's recovery does that mid-rebalance), and still drops it when the
flow resumes after a suspension (those messages belong to the old assignment)."""

from __future__ import annotations

import asyncio

from mode.utils.queues import FlowControlEvent, FlowControlQueue

from models import GpufragSettings
from streams.distributed.app import WorkerConfig, build_app
from streams.distributed.flow import KeepQueuesWhileFlowing
from streams.pipeline import define_pipeline


async def test_a_resume_while_flowing_keeps_the_queue_and_one_after_a_suspension_clears_it() -> (
    None
):
    flow = KeepQueuesWhileFlowing(initially_suspended=False, loop=asyncio.get_running_loop())
    queue: FlowControlQueue[int] = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    queue.put_nowait(1)
    queue.put_nowait(2)
    flow.resume()  # the recovery's second resume: nothing of an old assignment is queued
    assert queue.qsize() == 2
    flow.suspend()  # a rebalance
    flow.resume()
    assert queue.qsize() == 0


async def test_faust_own_flow_control_would_have_dropped_them() -> None:
    """The behaviour the worker works around, so the test above means something."""
    flow = FlowControlEvent(initially_suspended=False, loop=asyncio.get_running_loop())
    queue: FlowControlQueue[int] = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    queue.put_nowait(1)
    flow.resume()
    assert queue.qsize() == 0


def test_the_worker_app_uses_it(tmp_path: object) -> None:
    cfg = WorkerConfig(
        app_id="flow-test",
        bootstrap="127.0.0.1:1",
        credentials=None,
        prefix="flow-test.",
        replication=1,
        datadir=str(tmp_path),
        pipeline=define_pipeline(GpufragSettings()),
    )
    app, _ = build_app(cfg)
    assert isinstance(app.flow_control, KeepQueuesWhileFlowing)
