"""Compares deploy/z2jh/z2jh_chart.py (the reproduction of the chart's hub configuration the tests use) with
the chart's own `files/hub/jupyterhub_config.py`, run on deploy/z2jh/config.yaml: run it when the chart's
version changes, with a checkout of the chart's source at that version (the machine needs no cluster):

    git clone --branch 4.4.0 --depth 1 <zero-to-jupyterhub-k8s repository> /tmp/z2jh
    .venv/bin/python deploy/z2jh/compare_with_chart.py /tmp/z2jh

First it validates config.yaml, merged with the chart's values.yaml, against the chart's values schema (what
`helm install` checks before rendering: a misspelt key is refused).  Then it renders a student's and an
instructor's pod from both configurations and prints every difference in the pods: the chart's scheduling,
labels and cloud-metadata init container, which the reproduction leaves out (the test asserts none of them),
and nothing else.  Exit status 1 when the schema refuses the values or anything the test asserts differs.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import z2jh_chart  # noqa: E402
from z2jh_chart import render  # noqa: E402

# what the reproduction leaves out on purpose (no assertion of the test reads them)
NOT_REPRODUCED = {"metadata.labels", "spec.tolerations", "spec.affinity", "spec.initContainers", "spec.schedulerName"}


def chart_config(chart: Path, values_file: Path, work: Path):
    """The traitlets config the chart's hub builds: its jupyterhub_config.py and z2jh.py with their
    /usr/local/etc/jupyterhub paths moved under `work`, the chart's values.yaml merged with ours."""
    etc = work / "etc"
    for name in ("jupyterhub_config.py", "z2jh.py"):
        text = (chart / "jupyterhub" / "files" / "hub" / name).read_text()
        (work / name).write_text(text.replace("/usr/local/etc/jupyterhub", str(etc)))
    (etc / "secret").mkdir(parents=True)
    (etc / "config").mkdir()
    values = z2jh_chart.merged(yaml.safe_load((chart / "jupyterhub" / "values.yaml").read_text()),
                               yaml.safe_load(values_file.read_text()))
    values.update(Chart={"Name": "jupyterhub", "Version": z2jh_chart.CHART_VERSION}, Release={"Name": "rlhf"})
    (etc / "secret" / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    for key in ("hub.config.JupyterHub.cookie_secret", "hub.config.CryptKeeper.keys"):
        (etc / "secret" / key).write_text("0" * 64)
    for name in ("proxy-api", "hub", "user-scheduler", "priority", "image-pull-secret", "singleuser"):
        (etc / "config" / name).write_text(name)  # the chart's resource names (its ConfigMap)
    os.environ.update(PROXY_API_SERVICE_PORT="8001", HUB_SERVICE_PORT="8081")
    # the chart's hub image has pycurl for tornado's curl client; the HTTP client plays no part here
    import tornado.httpclient
    configure = tornado.httpclient.AsyncHTTPClient.configure
    tornado.httpclient.AsyncHTTPClient.configure = classmethod(lambda cls, *args, **kwargs: None)
    sys.path.insert(0, str(work))
    try:
        from traitlets.config.loader import PyFileConfigLoader
        return PyFileConfigLoader("jupyterhub_config.py", path=str(work)).load_config()
    finally:
        sys.path.remove(str(work))
        tornado.httpclient.AsyncHTTPClient.configure = configure


def differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and path.endswith(("containers", "volumes")):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield path, a, b


def schema_errors(chart: Path, values_file: Path) -> list[str]:
    import jsonschema
    schema = yaml.safe_load((chart / "jupyterhub" / "values.schema.yaml").read_text())
    values = z2jh_chart.merged(yaml.safe_load((chart / "jupyterhub" / "values.yaml").read_text()),
                               yaml.safe_load(values_file.read_text()))
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(values)]


def main(chart: Path) -> int:
    values_file = REPO / "deploy" / "z2jh" / "config.yaml"
    errors = schema_errors(chart, values_file)
    print(*errors or ["config.yaml is valid for the chart's values schema"], sep="\n")
    work = Path(tempfile.mkdtemp(prefix="z2jh-chart-"))
    try:
        real = chart_config(chart, values_file, work)
        ours = z2jh_chart.hub_config(z2jh_chart.load_values(values_file))
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "none",
            "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
            "users": [{"name": "none", "user": {"token": "none"}}],
            "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}]}))
        names = ["alice", "teacher"]
        pods_real, pods_ours = render(real, names, kubeconfig), render(ours, names, kubeconfig)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    status = int(bool(errors))
    for name in names:
        for path, mine, theirs in differences(pods_ours[name], pods_real[name]):
            expected = any(path == p or path.startswith(p + ".") for p in NOT_REPRODUCED)
            status |= not expected
            print(f"{name}: {path}{'' if expected else '  <- ASSERTED BY THE TEST'}\n"
                  f"    reproduction: {json.dumps(mine, default=str)[:200]}\n"
                  f"    chart:        {json.dumps(theirs, default=str)[:200]}")
    for section in ("JupyterHub.services", "JupyterHub.load_roles", "Authenticator.allowed_users",
                    "JupyterHub.authenticator_class"):
        cls, trait = section.split(".")
        if ours[cls].get(trait) != real[cls].get(trait):
            status = 1
            print(f"{section}: reproduction {ours[cls].get(trait)!r}, chart {real[cls].get(trait)!r}")
    print("the reproduction matches the chart on everything the test asserts" if not status else "MISMATCH")
    return status


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(Path(sys.argv[1])))
