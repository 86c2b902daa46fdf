"""The built-in pack's entry point: ``dirigent.plugins.v1`` → ``builtin``.

One module per family; this one only assembles them, so the catalog (and the block
reference generated from it) lists exactly what is contributed here.
"""

from __future__ import annotations

from dirigent.blocks import connections as kinds
from dirigent.blocks import notifiers
from dirigent.blocks.core import EchoOperator, FailOperator, NoopOperator, SleepOperator, WaitSensor
from dirigent.blocks.http import HttpReadySensor, HttpRequestOperator
from dirigent.blocks.jq import CHILD, FilterJqOperator, MapJqOperator, TransformJqOperator
from dirigent.blocks.kubernetes.docker import DockerRunOperator
from dirigent.blocks.pipelines import PipelineRunOperator
from dirigent.blocks.programs.pool import ChildPool
from dirigent.blocks.shell import ShellRunOperator
from dirigent.blocks.storage import (
    StorageCopyOperator,
    StorageExistsSensor,
    StorageListOperator,
    StorageReadOperator,
    StorageWriteOperator,
)
from dirigent.blocks.timing import TimeWindowSensor
from dirigent.blocks.webhook import WebhookPostOperator
from dirigent.sdk import Contribution


class BuiltinPlugin:
    """Contributes the blocks, connection kinds and notifiers every dirigent instance has."""

    def contribute(self) -> Contribution:
        programs = ChildPool(CHILD)  # one pool of jq children for the three operators
        return Contribution(
            operators=[
                NoopOperator(),
                EchoOperator(),
                SleepOperator(),
                FailOperator(),
                HttpRequestOperator(),
                WebhookPostOperator(),
                TransformJqOperator(programs),
                MapJqOperator(programs),
                FilterJqOperator(programs),
                StorageReadOperator(),
                StorageWriteOperator(),
                StorageCopyOperator(),
                StorageListOperator(),
                ShellRunOperator(),
                PipelineRunOperator(),
                DockerRunOperator(),
            ],
            sensors=[WaitSensor(), HttpReadySensor(), StorageExistsSensor(), TimeWindowSensor()],
            connection_kinds=[
                kinds.HttpConnectionKind(),
                kinds.WebhookConnectionKind(),
                kinds.SlackConnectionKind(),
                kinds.SmtpConnectionKind(),
                kinds.KubernetesConnectionKind(),
                kinds.PostgresConnectionKind(),
            ],
            notifiers=[
                notifiers.LogNotifier(),
                notifiers.WebhookNotifier(),
                notifiers.SlackNotifier(),
                notifiers.EmailNotifier(),
            ],
        )


plugin = BuiltinPlugin()
