"""The deploy paths agree with each other without a cluster: the Helm chart's default configuration
is k8s/config.yaml (the kustomize base's ConfigMap), and both name the image the Containerfile
builds at the package's version. Rendering, linting and server-side dry runs of both are e2e
(tests/e2e/test_deploy_e2e.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

import placer

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "placer"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_charts_configuration_is_the_kustomize_bases_but_for_the_lease_namespace() -> None:
    chart = _yaml(CHART / "values.yaml")["config"]
    base = _yaml(ROOT / "k8s" / "config.yaml")
    assert chart["leaderElection"].pop("namespace") == ""  # the chart fills in the release's namespace
    assert base["leaderElection"].pop("namespace") == "placer-system"
    assert chart == base


def test_the_chart_and_the_kustomize_base_name_one_image_at_the_packages_version() -> None:
    chart = _yaml(CHART / "Chart.yaml")
    assert chart["version"] == chart["appVersion"] == placer.__version__
    values = _yaml(CHART / "values.yaml")["image"]
    assert (values["repository"], values["tag"]) == ("placer", "")  # the tag defaults to appVersion
    (image,) = _yaml(ROOT / "k8s" / "kustomization.yaml")["images"]
    assert image == {"name": "placer", "newName": "placer", "newTag": placer.__version__}
    deployment = _yaml(ROOT / "k8s" / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].split(":")[0] == image["name"]  # what the images: entry rewrites
    containerfile = (ROOT / "k8s" / "Containerfile").read_text(encoding="utf-8")
    assert f"-t placer:{placer.__version__} ." in containerfile


def test_the_namespaced_components_pointer_leads_to_a_folder_that_exists() -> None:
    component = ROOT / "k8s" / "components" / "namespaced-writes"
    text = (component / "kustomization.yaml").read_text(encoding="utf-8")
    pointed = re.findall(r"(?:\.\./)+[\w./-]*\w", text)
    assert pointed
    for where in pointed:
        assert (component / where).resolve().is_dir(), where
