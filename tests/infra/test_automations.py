"""judgeflow's Prefect automations are valid for the Prefect it installs (Prefect's own models)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

FILES = sorted((Path(__file__).resolve().parents[2] / "deployments" / "automations").glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_automation_file_is_what_prefect_accepts(path: Path) -> None:
    from prefect.events.schemas.automations import AutomationCore

    automations = yaml.safe_load(path.read_text())["automations"]
    assert automations
    for raw in automations:
        automation = AutomationCore.model_validate(raw)
        assert automation.name.startswith("judgeflow-")


def test_the_crash_window_outlasts_prefects_heartbeat() -> None:
    """A run is declared dead only after several missed heartbeats (Prefect's default: 180 s)."""
    from prefect.settings.models.flows import FlowsSettings

    raw = yaml.safe_load((FILES[0].parent / "crashed-flow-runs.yaml").read_text())
    within = raw["automations"][0]["trigger"]["within"]
    default = FlowsSettings.model_fields["heartbeat_frequency"].default
    assert within >= 3 * default
