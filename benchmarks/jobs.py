"""Load generator jobs in processes of their own (multiprocessing, spawn), so that none shares an interpreter.

A job is an async function run on uvloop in a fresh process; it is named as ``module:function`` (or by one of
the short names of JOBS), so this runner imports no job module itself. Jobs that take a ``barrier`` (the
heartbeat runs) get one shared by all the processes of the call, and start together.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import multiprocessing
import queue
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

JOBS = {
    "form_groups": "benchmarks.loadgen:form_groups",
    "form_one": "benchmarks.loadgen:form_one",
    "heartbeats": "benchmarks.loadgen:heartbeats",
}


def raise_fd_limit() -> None:
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def job(name: str) -> Callable[..., Coroutine[Any, Any, dict[str, Any]]]:
    """A job by name: ``module:function``, or a short name of JOBS."""
    module, _, function = JOBS.get(name, name).partition(":")
    found: Callable[..., Coroutine[Any, Any, dict[str, Any]]] = getattr(importlib.import_module(module), function)
    return found


def _job_main(index: int, name: str, kwargs: dict[str, Any], barrier: Any, results: Any) -> None:
    raise_fd_limit()
    try:
        import uvloop

        work = job(name)
        if "barrier" in inspect.signature(work).parameters:  # the heartbeat runs start together
            kwargs = {**kwargs, "barrier": barrier}
        result = uvloop.run(work(**kwargs))
        results.put((index, result, None))
    except BaseException:
        results.put((index, None, traceback.format_exc()))


job_main = _job_main  # for a caller that runs one job beside its own party of the barrier


class JobFailed(Exception):
    pass


def run_jobs(name: str, jobs: Sequence[dict[str, Any]], timeout_s: float = 600) -> list[dict[str, Any]]:
    """Run one job per process (spawned, so nothing is inherited) and return their results in order."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(jobs))
    results = context.Queue()
    processes = [
        context.Process(target=_job_main, args=(i, name, dict(kwargs), barrier, results), daemon=True)
        for i, kwargs in enumerate(jobs)
    ]
    for process in processes:
        process.start()
    collected: dict[int, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + timeout_s
        while len(collected) < len(jobs):
            try:
                index, result, error = results.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise JobFailed(f"{name}: no result within {timeout_s:.0f} s") from None
            if error is not None:
                raise JobFailed(f"{name} job {index} failed:\n{error}")
            collected[index] = result
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    return [collected[i] for i in range(len(jobs))]
