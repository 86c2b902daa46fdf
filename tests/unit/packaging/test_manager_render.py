"""config/manager is the chart rendered: without helm, a changed chart is still caught.

The rendering itself is checked by `python -m hack.ship --check` where helm exists (make
lint after the e2e binaries are built, and the e2e chart tests); here the digest path that
runs without helm: the committed files carry the chart's current digest, and a chart
template change makes the digest differ.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hack.ship import manager

ROOT = Path(__file__).resolve().parents[3]


def test_committed_manager_files_carry_the_current_chart_digest() -> None:
    digest = manager.chart_digest(ROOT)
    for path in sorted((ROOT / "config/manager").glob("*.yaml")):
        found = manager.DIGEST.search(path.read_text())
        assert found is not None and found[1] == digest, path


def test_a_template_change_changes_the_digest(tmp_path: Path) -> None:
    shutil.copytree(ROOT / manager.CHART, tmp_path / manager.CHART)
    before = manager.chart_digest(tmp_path)
    template = tmp_path / manager.CHART / "templates" / "worker.yaml"
    template.write_text(template.read_text() + "# a change\n")
    assert manager.chart_digest(tmp_path) != before
