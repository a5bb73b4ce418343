"""The installed distribution's metadata: what a package index shows and what pip resolves extras from."""

import importlib.metadata
import importlib.resources
import sys

from packaging.requirements import Requirement

import kubevents

META = importlib.metadata.metadata("kubevents")


def test_version_is_the_distributions():
    assert kubevents.__version__ == importlib.metadata.version("kubevents")
    assert kubevents.__version__ == META["Version"]


def test_extras():
    assert {"lab", "polars", "kopf", "metrics", "capture", "test"} <= set(META.get_all("Provides-Extra") or [])
    requires = [Requirement(r) for r in META.get_all("Requires-Dist") or []]

    def extra(name: str) -> set[str]:
        return {r.name for r in requires if r.marker is not None and r.marker.evaluate({"extra": name})}

    assert "prometheus-client" in extra("metrics")
    assert "kubernetes" in extra("capture")
    # The package itself needs nothing: every dependency belongs to an extra.
    assert all(r.marker is not None for r in requires)


def test_the_lab_extra_runs_the_notebooks():
    """`pip install 'kubevents[lab]'` then `jupyter lab notebooks/` needs JupyterLab and a Python kernel, besides
    what the notebooks import."""
    requires = [Requirement(r) for r in META.get_all("Requires-Dist") or []]
    lab = {r.name for r in requires if r.marker is not None and r.marker.evaluate({"extra": "lab"})}
    assert {"jupyterlab", "ipykernel", "matplotlib", "pandas", "pyarrow", "tqdm"} <= lab


def test_license():
    assert META["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (META.get_all("License-File") or [])
    files = importlib.metadata.distribution("kubevents").files or []
    license_file = next(f for f in files if f.name == "LICENSE")
    assert "Apache License" in license_file.read_text()


def test_classifiers_and_urls():
    classifiers = META.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}" in classifiers
    urls = dict(u.split(", ", 1) for u in META.get_all("Project-URL") or [])
    assert urls["Repository"] == "https://github.com/kubevents/kubevents"
    assert {"Homepage", "Documentation", "Issues"} <= set(urls)
    assert META["Summary"]
    assert META["Requires-Python"] == ">=3.11"


def test_typed_marker_is_installed():
    assert (importlib.resources.files("kubevents") / "py.typed").is_file()
