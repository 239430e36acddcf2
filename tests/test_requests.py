"""A pod's effective request: containers, sidecars, init containers, pod-level resources, overhead."""

import json

from placer.inputs import parse_cluster

MI = 2**20


def _pod(spec: dict[str, object]) -> dict[str, int]:
    doc = {
        "kind": "List",
        "items": [
            {"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}},
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec},
        ],
    }
    return dict(parse_cluster("t.json", json.dumps(doc)).pods[0].requests)


def _c(cpu: str, mem: str = "0", **extra: object) -> dict[str, object]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}, **extra}


def test_containers_add_up() -> None:
    assert _pod({"containers": [_c("1", "100Mi"), _c("500m", "50Mi")]}) == {"cpu": 1500, "memory": 150 * MI}


def test_a_large_init_container_dominates_the_sum() -> None:
    assert _pod({"containers": [_c("1")], "initContainers": [_c("3")]})["cpu"] == 3000


def test_sidecars_keep_running_next_to_the_containers() -> None:
    spec = {"containers": [_c("1")], "initContainers": [_c("500m", restartPolicy="Always")]}
    assert _pod(spec)["cpu"] == 1500


def test_an_init_container_after_a_sidecar_runs_beside_it() -> None:
    spec = {
        "containers": [_c("1")],
        "initContainers": [_c("1", restartPolicy="Always"), _c("3")],
    }
    # max(1 + 1, 3 + 1) = 4: the plain init container runs while the earlier sidecar runs.
    assert _pod(spec)["cpu"] == 4000


def test_an_init_container_before_a_sidecar_does_not_run_beside_it() -> None:
    spec = {
        "containers": [_c("1")],
        "initContainers": [_c("3"), _c("1", restartPolicy="Always")],
    }
    assert _pod(spec)["cpu"] == 3000


def test_overhead_is_added() -> None:
    spec = {"containers": [_c("1", "1Gi")], "overhead": {"cpu": "250m", "memory": "100Mi"}}
    assert _pod(spec) == {"cpu": 1250, "memory": 1024 * MI + 100 * MI}


def test_pod_level_requests_replace_the_container_aggregate() -> None:
    spec = {"containers": [_c("1", "1Gi"), _c("1", "1Gi")], "resources": {"requests": {"cpu": "3"}}}
    assert _pod(spec) == {"cpu": 3000, "memory": 2 * 1024 * MI}


def test_limits_stand_in_for_missing_requests() -> None:
    spec = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "placer.io/bandwidth": "100"}}}]}
    assert _pod(spec) == {"cpu": 2000, "placer.io/bandwidth": 100}


def test_scoring_counts_defaults_for_containers_without_requests() -> None:
    doc = {
        "kind": "List",
        "items": [
            {"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "8"}}},
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, _c("1")]}},
        ],
    }
    pod = parse_cluster("t.json", json.dumps(doc)).pods[0]
    # An explicit 0 memory request stays 0; only the absent one defaults to 200Mi.
    assert (pod.score_cpu, pod.score_memory) == (1100, 200 * MI)
    assert pod.requests == {"cpu": 1000}
