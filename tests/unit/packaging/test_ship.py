"""The packaging generators (hack/ship): the chart's values, schema and reference agree,
cover every engine setting, and the drift check catches a stale or hand-edited file."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml

from dirigent.engine import EngineSettings
from hack.ship import __main__ as ship
from hack.ship import chartvalues
from hack.ship.values import ENGINE_SETTINGS_IN_CHART, camel


def _schema() -> dict[str, object]:
    return json.loads(chartvalues.schema_json())  # type: ignore[no-any-return]


def test_the_generated_values_file_fits_the_schema() -> None:
    values = yaml.safe_load(chartvalues.values_yaml())
    jsonschema.validate(values, _schema())


@pytest.mark.parametrize(
    "typo",
    [
        {"worker": {"replica": 3}},
        {"imag": {}},
        {"settings": {"pollIntervall": "1s"}},
        {"api": {"service": {"typ": "x"}}},
    ],
)
def test_a_typo_anywhere_is_refused(typo: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        jsonschema.validate(typo, _schema())


def test_wrong_types_and_enums_are_refused() -> None:
    for bad in (
        {"worker": {"replicas": "two"}},
        {"image": {"pullPolicy": "Sometimes"}},
        {"worker": {"concurrency": 0}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, _schema())


def test_every_engine_setting_is_reachable_from_values() -> None:
    in_settings = set(yaml.safe_load(chartvalues.values_yaml())["settings"])
    for name in EngineSettings.model_fields:
        assert camel(name) in in_settings or name in ENGINE_SETTINGS_IN_CHART, name


def _sprig_snakecase(text: str) -> str:
    # What the chart's `snakecase` does for lower camelCase keys.
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()


@pytest.mark.parametrize("name", list(EngineSettings.model_fields))
def test_camel_keys_map_back_to_the_variable(name: str) -> None:
    assert _sprig_snakecase(camel(name)) == name


def test_every_value_is_in_the_reference() -> None:
    table = chartvalues.reference_table()
    for key in (
        "worker.concurrency",
        "settings.retentionRuns",
        "metrics.serviceMonitor.enabled",
        "crds.keep",
    ):
        assert f"| `{key}` |" in table


def test_the_drift_check_names_a_changed_and_a_missing_file() -> None:
    files = ship.wanted()
    assert ship.differences(files) == []
    edited = {
        **files,
        "charts/dirigent/values.yaml": files["charts/dirigent/values.yaml"] + "x: 1\n",
    }
    found = "".join(ship.differences(edited))
    assert "+x: 1" in found
    missing = {**files, "config/samples/new.yaml": "a: b\n"}
    assert "missing: config/samples/new.yaml" in "".join(ship.differences(missing))
    fewer = {k: v for k, v in files.items() if k != "config/rbac/viewer_role.yaml"}
    assert "stale (nothing generates it): config/rbac/viewer_role.yaml" in "".join(
        ship.differences(fewer)
    )
