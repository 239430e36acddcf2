"""testenv: kube-scheduler's client settings through a KubeSchedulerConfiguration file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from testenv.cluster import Cluster  # noqa: E402


def test_without_a_config_kube_scheduler_gets_the_plain_flags(tmp_path: Path) -> None:
    args = Cluster(workdir=tmp_path)._scheduler_client(tmp_path / "scheduler.kubeconfig")
    assert args == [f"--kubeconfig={tmp_path / 'scheduler.kubeconfig'}", "--leader-elect=false"]


def test_a_config_file_carries_the_client_limits_the_kubeconfig_and_no_election(tmp_path: Path) -> None:
    c = Cluster(workdir=tmp_path, scheduler_config={"clientConnection": {"qps": 1000, "burst": 2000}})
    (arg,) = c._scheduler_client(tmp_path / "scheduler.kubeconfig")
    assert arg.startswith("--config=")
    cfg = json.loads(Path(arg.removeprefix("--config=")).read_text())
    assert cfg["kind"] == "KubeSchedulerConfiguration" and cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["clientConnection"] == {"qps": 1000, "burst": 2000, "kubeconfig": str(tmp_path / "scheduler.kubeconfig")}
    assert cfg["leaderElection"] == {"leaderElect": False}
