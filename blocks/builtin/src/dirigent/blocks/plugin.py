"""The built-in pack's entry point: ``dirigent.plugins.v1`` → ``builtin``."""

from __future__ import annotations

from dirigent.blocks.core import EchoOperator, FailOperator, NoopOperator, SleepOperator, WaitSensor
from dirigent.sdk import Contribution


class BuiltinPlugin:
    """Contributes the blocks every dirigent instance has."""

    def contribute(self) -> Contribution:
        return Contribution(
            operators=[NoopOperator(), EchoOperator(), SleepOperator(), FailOperator()],
            sensors=[WaitSensor()],
        )


plugin = BuiltinPlugin()
