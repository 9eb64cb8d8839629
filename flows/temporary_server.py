"""How a flow runs against `judgeflow run`'s temporary Prefect server.

Flow-run heartbeats let a lasting server's automation mark a run whose process died as crashed
(deployments/automations/crashed-flow-runs.yaml). The temporary server ends with the command, so
nothing would ever read them there, and stopping their thread costs up to a second at the end of
every run. Runs against a server named by PREFECT_API_URL keep them.

Importing this module also loads Prefect's flow and task engines, which a flow otherwise imports
as it begins: `judgeflow run` imports it while the server is still starting.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import prefect.flow_engine
import prefect.task_engine  # noqa: F401
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings


@contextmanager
def without_heartbeats() -> Iterator[None]:
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
