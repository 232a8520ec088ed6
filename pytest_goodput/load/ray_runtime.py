"""The Ray runtime the Ray backend's workers run on: joined or started once, shut down once.

``configure(address)`` is called by the plugin (``--goodput-ray``) and the CLI (``run
--ray``); the first run that needs Ray calls :func:`ensure`. ``local`` starts a small Ray
runtime on this machine (the same code path as a cluster, for tests and single-box runs),
anything else joins an existing cluster. A runtime already initialized in this process (a
test fixture, an application) is used as it is and never shut down here. Ray is imported
only here and only when a run uses it, so ``pip install "pytest-goodput[ray]"`` is optional.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

from pytest_goodput.load.pools.ray.actors import forget

from pytest_goodput.schema.addresses import RAY_LOCAL, check_ray_address

#: Object store of a local runtime: a run's results travel as small column arrays.
LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024

_address: Optional[str] = None
_started = False


class RayUnavailableError(RuntimeError):
    """The Ray backend was asked for but Ray is not installed or the cluster cannot be joined."""


def configure(address: Optional[str]) -> None:
    """Use ``address`` (checked; None: a local runtime) for the runs that follow."""
    global _address
    _address = None if address is None else check_ray_address(address)


def address() -> str:
    return _address or RAY_LOCAL


def ensure() -> Any:
    """The ``ray`` module, initialized: joined, started, or as this process already had it
    (with the submodules the pool uses: ``cloudpickle``, ``util.scheduling_strategies``)."""
    global _started
    try:
        import ray.cloudpickle, ray.util.scheduling_strategies  # noqa: E401 - the one import of Ray
    except ImportError:
        raise RayUnavailableError('the Ray backend needs Ray: pip install "pytest-goodput[ray]"') from None
    if ray.is_initialized():
        return ray
    where = address()
    try:
        if where == RAY_LOCAL:
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False,
                     object_store_memory=LOCAL_OBJECT_STORE_BYTES, log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address=where, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnavailableError(f"could not {'start' if where == RAY_LOCAL else 'join'} the Ray "
                                  f"runtime at {where}: {exc}") from None
    _started = True
    return ray


def shutdown() -> None:
    """Kill the session's idle load-worker actors, and shut Ray down if :func:`ensure` started
    or joined it (else leave it to its owner)."""
    global _started
    ray = sys.modules.get("ray")  # never imported: no actor was ever made
    if ray is None:
        return
    forget(ray)
    if not _started:
        return
    _started = False
    if ray.is_initialized():
        ray.shutdown()
