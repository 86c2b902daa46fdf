"""dirigent.sdk -- the block contract a third-party block imports: tiny, stable.

Why one flat namespace: a block package writes ``from dirigent.sdk import Operator,
OperatorSpec, StepContext`` and never learns the module layout, so modules can be split or
merged without breaking anyone. ``__all__`` below is the public API; a test guards it, so
adding or removing a name is a deliberate change. Depends only on pydantic.

Modules: ``names`` (entity / step / block-id grammars), ``units`` (Duration, Size),
``messages`` (catalogued sentences), ``errors`` (ErrorClass, BlockFailure), ``issues``
(check_config problems), ``specs`` (block declarations), ``results`` (handles, probe
results, NotYet), ``context`` (StepContext and what it carries), ``blocks`` (Operator,
Sensor), ``storage`` (storage backends: ObjectStore, StorageBackend, their errors),
``plugins`` (Contribution, connection kinds, notifiers, entry-point group), ``secrets``
(redacting known secret values from text, describing a refusal without its input).
"""

from pydantic import JsonValue

from dirigent.sdk.blocks import ConfigT, Operator, OutputT, Sensor, block_kind
from dirigent.sdk.context import (
    ArtifactInfo,
    ObjectWriter,
    Runs,
    RunSnapshot,
    StartedRun,
    StepContext,
    StepLog,
    Storage,
)
from dirigent.sdk.errors import (
    BlockFailure,
    ErrorClass,
    classify_default,
    http_status_class,
    json_safe,
)
from dirigent.sdk.issues import Issue
from dirigent.sdk.messages import Message
from dirigent.sdk.names import (
    BLOCK_ID_PATTERN,
    ENTITY_NAME_PATTERN,
    NAMESPACE_PATTERN,
    STEP_NAME_PATTERN,
    BlockId,
    EntityName,
    StepName,
    entity_name_problem,
    is_block_id,
    is_entity_name,
    is_step_name,
    step_name_problem,
)
from dirigent.sdk.plugins import (
    API_VERSION,
    ENTRY_POINT_GROUP,
    ConnectionKind,
    Contribution,
    FormatChecker,
    HealthReport,
    NotificationMessage,
    Notifier,
    Plugin,
    secret_fields,
)
from dirigent.sdk.results import NotYet, ProbeResult, ProbeStatus, RemoteHandle
from dirigent.sdk.secrets import (
    REDACTED,
    redact,
    redact_json,
    redacting,
    secret_values,
    validation_summary,
)
from dirigent.sdk.specs import BlockSpec, ConnectionField, OperatorSpec, SensorSpec
from dirigent.sdk.storage import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_CONTENT_TYPE,
    SCHEME_PATTERN,
    InvalidRange,
    ObjectNotFound,
    ObjectReader,
    ObjectStore,
    StorageBackend,
    StorageError,
    StorageRefused,
    StorageUnavailable,
    glob_prefix,
    stream_copy,
)
from dirigent.sdk.units import Duration, Size

__all__ = [
    "API_VERSION",
    "BLOCK_ID_PATTERN",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_CONTENT_TYPE",
    "ENTITY_NAME_PATTERN",
    "ENTRY_POINT_GROUP",
    "NAMESPACE_PATTERN",
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
]
