"""Guard the public surface: adding or removing a public name is a conscious change.

If this fails because you added or removed a name in ``dirigent.sdk.__all__``, update the
list below in the same commit, and remember that third-party blocks import these names:
removing one is a breaking change.
"""

from __future__ import annotations

import subprocess
import sys

import dirigent.sdk as sdk

EXPECTED = {
    "API_VERSION",
    "BLOCK_ID_PATTERN",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_CONTENT_TYPE",
    "ENTITY_NAME_PATTERN",
    "NAMESPACE_PATTERN",
    "ENTRY_POINT_GROUP",
    "REDACTED",
    "SCHEME_PATTERN",
    "STEP_NAME_PATTERN",
    "ArtifactInfo",
    "BlockFailure",
    "BlockId",
    "BlockSpec",
    "ConfigT",
    "ConnectionField",
    "ConnectionKind",
    "Contribution",
    "Duration",
    "EntityName",
    "ErrorClass",
    "FormatChecker",
    "HealthReport",
    "InvalidRange",
    "Issue",
    "JsonValue",
    "Message",
    "NotYet",
    "NotificationMessage",
    "Notifier",
    "ObjectNotFound",
    "ObjectReader",
    "ObjectStore",
    "ObjectWriter",
    "Operator",
    "OperatorSpec",
    "OutputT",
    "Plugin",
    "ProbeResult",
    "ProbeStatus",
    "RemoteHandle",
    "RunSnapshot",
    "Runs",
    "Sensor",
    "SensorSpec",
    "Size",
    "StartedRun",
    "StepContext",
    "StepLog",
    "StepName",
    "Storage",
    "StorageBackend",
    "StorageError",
    "StorageRefused",
    "StorageUnavailable",
    "block_kind",
    "classify_default",
    "entity_name_problem",
    "glob_prefix",
    "http_status_class",
    "is_block_id",
    "is_entity_name",
    "is_step_name",
    "json_safe",
    "redact",
    "redact_json",
    "redacting",
    "secret_fields",
    "secret_values",
    "step_name_problem",
    "stream_copy",
    "validation_summary",
}


def test_all_is_exactly_the_expected_surface() -> None:
    assert set(sdk.__all__) == EXPECTED
    assert len(sdk.__all__) == len(EXPECTED), "duplicate names in __all__"


def test_every_public_name_resolves() -> None:
    for name in sdk.__all__:
        assert hasattr(sdk, name), name


def test_sdk_depends_only_on_pydantic_and_the_standard_library() -> None:
    # In a fresh interpreter, so modules other tests imported do not count.
    probe = (
        "import sys, dirigent.sdk; "
        "print('\\n'.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout.split()
    allowed = {"dirigent", "pydantic", "pydantic_core", "typing_extensions", "annotated_types"}
    allowed |= {"typing_inspection", "_distutils_hack", "sitecustomize", "usercustomize"}
    foreign = [m for m in out if m not in allowed and m not in sys.stdlib_module_names]
    assert not [m for m in foreign if not m.startswith("_")], foreign
