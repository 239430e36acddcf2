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


def test_workloads_turn_on_the_1_37_gates_and_serve_both_scheduling_versions(tmp_path: Path) -> None:
    c = Cluster(workdir=tmp_path, workloads=True)
    (gates,) = c._gates()
    assert gates == (
        "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,"
        "CompositePodGroup=true,PodGroupPreemptionPolicy=true"
    )
    assert c._runtime_config() == ["--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"]


def test_explicit_gates_and_apis_come_after_the_workload_ones_so_they_win(tmp_path: Path) -> None:
    c = Cluster(workdir=tmp_path, workloads=True, feature_gates="CompositePodGroup=false",
                runtime_config="scheduling.k8s.io/v1alpha3=false")  # fmt: skip
    (gates,) = c._gates()
    assert gates.endswith(",PodGroupPreemptionPolicy=true,CompositePodGroup=false")
    (apis,) = c._runtime_config()
    assert apis.endswith("v1alpha3=true,scheduling.k8s.io/v1alpha3=false")


def test_without_workloads_only_the_explicit_gates_are_passed(tmp_path: Path) -> None:
    assert Cluster(workdir=tmp_path)._gates() == [] and Cluster(workdir=tmp_path)._runtime_config() == []
    c = Cluster(workdir=tmp_path, feature_gates="GenericWorkload=true", runtime_config="scheduling.k8s.io/v1beta1=true")
    assert c._gates() == ["--feature-gates=GenericWorkload=true"]
    assert c._runtime_config() == ["--runtime-config=scheduling.k8s.io/v1beta1=true"]
