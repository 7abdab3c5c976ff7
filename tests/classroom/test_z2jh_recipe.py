"""The course on Zero to JupyterHub (deploy/z2jh), checked as far as a machine without a cluster allows:
the values file loaded as the chart's hub loads it (deploy/z2jh/z2jh_chart.py reproduces the chart's
mapping for the keys config.yaml uses), a KubeSpawner (the pinned one, the hub image's) configured from
it, and the pods it would create for a student and for the instructor rendered by KubeSpawner's own
`get_pod_manifest` (no Kubernetes API is contacted); the culler's command line parsed by the pinned
jupyterhub-idle-culler; the Dockerfiles read against requirements.txt.  Never run here: Helm, Docker,
a cluster, an NFS server (docs/classroom.md says what that leaves unchecked)."""
import json
import re
import shlex
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.course import REPO, deploy_module

DEPLOY = REPO / "deploy" / "z2jh"
z2jh_chart = deploy_module("z2jh_chart")  # the chart's hub, reproduced
render = z2jh_chart.render
# Measured per student on the local hub (`make hub`, issue #37's figures): after the lab's training cell
# (server + kernel; docs/classroom.md, "On Kubernetes").
MEASURED_PEAK_BYTES = 520e6


def requirements() -> dict[str, Requirement]:
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            pins[requirement.name.lower().replace("_", "-")] = requirement
    return pins


def pinned_version(name: str) -> str:
    (spec,) = requirements()[name].specifier
    assert spec.operator == "==", f"{name} is not pinned exactly in requirements.txt"
    return spec.version


@pytest.fixture(scope="module")
def values():
    return z2jh_chart.load_values(DEPLOY / "config.yaml")


@pytest.fixture(scope="module")
def hub_config(values):
    return z2jh_chart.hub_config(values)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory) -> Path:
    """A kubeconfig naming an address nobody listens on (KubeSpawner reads one when it is made)."""
    path = tmp_path_factory.mktemp("kube") / "config"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "none", "user": {"token": "none"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}]}))
    return path


@pytest.fixture(scope="module")
def pods(hub_config, kubeconfig):
    return render(hub_config, ["alice", "teacher"], kubeconfig)


def container(pod):
    (notebook,) = pod["spec"]["containers"]
    return notebook


def env(pod) -> dict:
    return {item["name"]: item.get("value") for item in container(pod)["env"]}


def mounts(pod) -> dict:
    return {m["mountPath"]: m for m in container(pod)["volumeMounts"]}


def volume(pod, name) -> dict:
    return next(v for v in pod["spec"]["volumes"] if v["name"] == name)


def roster(values, file) -> dict[str, list[str]]:
    text = values["singleuser"]["extraFiles"][file]["stringData"]
    return {fields[0]: fields for fields in (line.split(":") for line in text.splitlines() if line)}


def test_the_kubespawner_pin_installs_with_the_pinned_jupyterhub():
    from importlib.metadata import requires, version
    assert version("jupyterhub-kubespawner") == pinned_version("jupyterhub-kubespawner")
    assert version("jupyterhub-idle-culler") == pinned_version("jupyterhub-idle-culler")
    pins = requirements()
    for package in ("jupyterhub-kubespawner", "jupyterhub-idle-culler"):
        for line in requires(package):
            needed = Requirement(line)
            if needed.marker and not needed.marker.evaluate({"extra": ""}):
                continue  # test extras
            name = needed.name.lower().replace("_", "-")
            assert name in pins, f"{package} needs {needed.name}, not pinned in requirements.txt"
            assert needed.specifier.contains(pinned_version(name), prereleases=True), (package, line)


def test_requirements_txt_is_closed_so_the_image_can_install_it_without_resolving():
    """The image installs the list with --no-deps: every dependency of every pin, for Python 3.11 on
    Linux, must be pinned in it at a version it accepts (pip check in the image says the same)."""
    from importlib.metadata import distributions
    pins = requirements()
    requires = {dist.metadata["Name"].lower().replace("_", "-"): dist.requires for dist in distributions()}
    platform = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
                "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    missing = []
    for name in pins:
        for line in requires[name] or []:
            needed = Requirement(line)
            if needed.marker and not needed.marker.evaluate(platform):
                continue
            dependency = needed.name.lower().replace("_", "-")
            if dependency not in pins or not needed.specifier.contains(pinned_version(dependency), prereleases=True):
                missing.append(f"{name} needs {line}")
    assert not missing


def test_a_students_pod_has_the_limits_from_the_measured_figures(pods):
    resources = container(pods["alice"])["resources"]
    memory_guarantee, memory_limit = int(resources["requests"]["memory"]), int(resources["limits"]["memory"])
    assert memory_guarantee == 640 * 1024**2 and memory_limit == 2 * 1024**3
    # the guarantee covers the measured peak with a margin; the limit, a second lab beside the first
    assert 1.2 * MEASURED_PEAK_BYTES <= memory_guarantee < 2 * MEASURED_PEAK_BYTES
    assert memory_limit >= 1.5 * 2 * MEASURED_PEAK_BYTES  # two labs trained at once, with half as much again
    assert float(resources["limits"]["cpu"]) == 1.0  # as ClassroomSpawner's cpu_limit on one machine
    assert float(resources["requests"]["cpu"]) == 0.25


def test_a_students_pod_runs_the_course_image_as_that_student(pods, values):
    pod = pods["alice"]
    assert container(pod)["image"] == "REGISTRY/rlhf-course-singleuser:2026-12"
    passwd = roster(values, "passwd")
    uid, gid = int(passwd["alice"][2]), int(passwd["alice"][3])
    assert container(pod)["securityContext"] == {"runAsUser": uid, "runAsGroup": gid,
                                                 "allowPrivilegeEscalation": False}
    assert pod["spec"]["securityContext"]["fsGroup"] == gid  # the home is hers, no one else's group
    group_names = [fields[0] for fields in roster(values, "group").values() if int(fields[2]) == gid]
    assert group_names == ["alice"]
    assert len({fields[2] for fields in passwd.values()}) == len(passwd), "uids must be unique"
    assert container(pod)["args"] == ["jupyterhub-singleuser"]  # singleuser.cmd: the hub's major version


def test_a_students_pod_mounts_her_home_the_exchange_and_the_roster_only(pods, values):
    pod = pods["alice"]
    found = mounts(pod)
    assert set(found) == {"/home/jovyan", "/srv/nbgrader/exchange", "/etc/passwd", "/etc/group"}
    home = volume(pod, found["/home/jovyan"]["name"])
    assert home["persistentVolumeClaim"]["claimName"] == "claim-alice"
    exchange = volume(pod, found["/srv/nbgrader/exchange"]["name"])
    assert set(exchange) == {"name", "nfs"}, "kubelet must not change the exchange's owners (fsGroup)"
    assert volume(pod, "files")["secret"]["items"] == [{"key": "passwd", "path": "passwd", "mode": 0o444},
                                                       {"key": "group", "path": "group", "mode": 0o444}]
    assert found["/etc/passwd"]["subPath"] == "passwd" and found["/etc/group"]["subPath"] == "group"
    assert "course" not in {v["name"] for v in pod["spec"]["volumes"]}  # no solutions near a student


def test_a_students_server_gets_the_exchange_and_one_thread(pods):
    found = env(pods["alice"])
    student_config = (DEPLOY / "jupyter" / "student" / "nbgrader_config.py").read_text()
    assert '"/srv/nbgrader/exchange"' in student_config and '"rlhf-course"' in student_config
    assert found["RLHF_EXCHANGE_ROOT"] == "/srv/nbgrader/exchange"
    from rlhf_course.exchange import DEFAULT_COURSE_ID  # the course's nbgrader_config.py's default
    assert found["RLHF_COURSE_ID"] == DEFAULT_COURSE_ID
    assert found["JUPYTER_CONFIG_PATH"].split(":") == ["/etc/rlhf-course/jupyter/student",
                                                        "/etc/rlhf-course/jupyter/everyone"]
    assert found["OMP_NUM_THREADS"] == found["RLHF_LAB_THREADS"] == "1"
    assert found["OMP_WAIT_POLICY"] == "PASSIVE"
    assert found["JUPYTERHUB_USER"] == "alice"


def test_a_students_validate_waits_for_a_busy_kernel_as_on_the_local_hub(tmp_path, monkeypatch):
    from traitlets.config.loader import PyFileConfigLoader

    from rlhf_course.classroom.config import VALIDATE_BLOCKED_SECONDS, VALIDATE_CPU_SECONDS, VALIDATE_SECONDS
    from rlhf_course.classroom.hub import EVERYONE_NBGRADER_CONFIG
    monkeypatch.delenv("RLHF_EXCHANGE_ROOT", raising=False)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(DEPLOY / "jupyter" / "student")).load_config()
    assert VALIDATE_SECONDS >= 60
    for wait in ("timeout", "iopub_timeout", "startup_timeout"):
        assert config.Execute[wait] == VALIDATE_SECONDS, wait
    assert config.PatientExecute.cpu_seconds == VALIDATE_CPU_SECONDS  # the Validate button's, as on the local hub
    assert config.PatientExecute.blocked_seconds == VALIDATE_BLOCKED_SECONDS
    assert config.Exchange.root == "/srv/nbgrader/exchange"
    (tmp_path / "nbgrader_config.py").write_text(EVERYONE_NBGRADER_CONFIG)  # every user's on the local hub
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # where its kernels' sockets go
    on_the_hub = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    assert (on_the_hub.Execute, on_the_hub.PatientExecute) == (config.Execute, config.PatientExecute)


def test_the_instructors_pod_has_the_course_and_the_formgrader(pods, values):
    pod = pods["teacher"]
    passwd, group = roster(values, "passwd"), roster(values, "group")
    instructors = group[values["custom"]["rlhfCourse"]["instructorsGroup"]]
    assert "teacher" in instructors[3].split(",")
    assert container(pod)["securityContext"]["runAsUser"] == int(passwd["teacher"][2])
    assert container(pod)["securityContext"]["runAsGroup"] == int(instructors[2])
    course = values["custom"]["rlhfCourse"]["courseDir"]
    assert mounts(pod)[course]["name"] == "course" and "nfs" in volume(pod, "course")
    assert container(pod)["workingDir"] == course  # nbgrader reads the course's nbgrader_config.py there
    assert env(pod)["JUPYTERHUB_ROOT_DIR"] == course  # the Jupyter server's root: the course
    assert env(pod)["JUPYTER_CONFIG_PATH"] == "/etc/rlhf-course/jupyter/everyone"  # no student config: Formgrader on
    assert "/srv/nbgrader/exchange" in mounts(pod)


def test_someone_off_the_roster_gets_no_server(hub_config, kubeconfig):
    with pytest.raises(ValueError, match="mallory is not on the course roster"):
        render(hub_config, ["mallory"], kubeconfig)
    assert hub_config.Authenticator.allowed_users == {"teacher", "alice", "bob"}


def test_the_hub_asks_for_a_real_login_and_refuses_a_bad_roster(hub_config, values):
    assert hub_config.JupyterHub.authenticator_class == "generic-oauth"  # the chart's default is `dummy`
    assert hub_config.JupyterHub.admin_access is False
    bad = json.loads(json.dumps(values))
    passwd = bad["singleuser"]["extraFiles"]["passwd"]
    text = passwd["stringData"]
    passwd["stringData"] = text + "mallory:x:20101:20101:student:/home/jovyan:/bin/bash\n"  # alice's uid
    with pytest.raises(ValueError, match="two accounts share a uid"):
        z2jh_chart.hub_config(bad)
    passwd["stringData"] = text + "eve+x:x:20199:20199:student:/home/jovyan:/bin/bash\n"
    with pytest.raises(ValueError, match=re.escape("names nbgrader's exchange refuses: ['eve+x']")):
        z2jh_chart.hub_config(bad)
    # the hub's check is the exchange's own rule (read from its source: importing it imports nbgrader)
    (collect_rule,) = re.findall(r'_STUDENT_NAME = re.compile\(r"([^"]+)"\)',
                                 (REPO / "rlhf_course" / "exchange" / "collect.py").read_text())
    assert f'r"{collect_rule}"' in values["hub"]["extraConfig"]["rlhfCourse"]
    assert all(re.fullmatch(collect_rule, name) for name in roster(values, "passwd"))


def test_the_idle_culler_runs_with_the_configured_timeout(hub_config, values):
    from jupyterhub_idle_culler import IdleCuller
    (service,) = [s for s in hub_config.JupyterHub.services if s["name"] == "jupyterhub-idle-culler"]
    assert service["command"][:3] == ["python3", "-m", "jupyterhub_idle_culler"]
    culler = IdleCuller()
    culler.parse_command_line(service["command"][3:])  # the pinned culler's own options
    assert culler.timeout == values["cull"]["timeout"] == 1800
    assert culler.cull_every == 300 and not culler.cull_users
    (role,) = [role for role in hub_config.JupyterHub.load_roles if role["name"] == "jupyterhub-idle-culler"]
    assert "delete:servers" in role["scopes"] and role["services"] == ["jupyterhub-idle-culler"]


def test_a_user_makes_no_token_on_kubernetes_either(hub_config):
    """The note of a token a user asks for is stored in the hub's database whatever its size: the chart's hub, like
    make hub's, gives a user JupyterHub's "self" without "tokens" (rlhf_course/classroom/hub_requests.py)."""
    from rlhf_course.classroom.hub_requests import USER_SCOPES
    (role,) = [role for role in hub_config.JupyterHub.load_roles if role["name"] == "user"]
    assert role["scopes"] == USER_SCOPES and not any(scope.startswith("tokens") for scope in role["scopes"])


def run_lines(dockerfile: Path) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"^\s*#.*\n", "", dockerfile.read_text(), flags=re.M)
    return [line.strip() for line in re.sub(r"\\\n", " ", text).splitlines() if line.strip()]


def pip_installs(lines) -> list[list[str]]:
    commands = []
    for line in lines:
        if line.startswith("RUN "):
            for command in re.split(r"&&|;", line[4:]):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    commands.append(words[2:])
    return commands


def test_the_image_installs_exactly_requirements_txt_and_the_package():
    lines = run_lines(DEPLOY / "Dockerfile")
    assert lines[0] == "FROM python:3.11.7-slim-bookworm"  # a pinned base, the Python the course runs on
    installs = pip_installs(lines)
    from_list = [words for words in installs if "-r" in words]
    assert from_list == [["--no-deps", "--extra-index-url", "https://download.pytorch.org/whl/cpu", "-r",
                          "/tmp/rlhf-course/requirements.txt"]]
    assert "COPY requirements.txt /tmp/rlhf-course/requirements.txt" in lines
    assert any("pip check" in line for line in lines)
    assert "jupyterlab-language-pack-zh-cn" in requirements()  # JupyterLab in Chinese, from the list
    others = [words for words in installs if words not in from_list]
    assert others == [["--no-deps", "--no-build-isolation", "/tmp/rlhf-course"]]  # the package adds nothing
    assert "COPY rlhf_course /tmp/rlhf-course/rlhf_course" in lines


def test_the_image_holds_the_course_config_and_never_the_solutions():
    lines = run_lines(DEPLOY / "Dockerfile")
    sources = [line.split()[1] for line in lines if line.startswith(("COPY ", "ADD "))]
    for source in sources:
        assert (REPO / source).exists(), source
        assert source.split("/")[0] not in ("source", "instructor", "i18n", "release", "."), source
    assert not any(line.startswith("ADD ") for line in lines)
    assert "jupyter/student/labconfig" in sources
    assert "jupyter/labextension/rlhf-course-deadlines" in sources  # the Assignment List's due dates
    from rlhf_course.classroom.hub import KERNEL_INFO_SECONDS, STUDENT_SERVER_EXTENSIONS_OFF
    server = json.loads((DEPLOY / "jupyter" / "student" / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"] == {name: False for name in STUDENT_SERVER_EXTENSIONS_OFF}
    assert server["MappingKernelManager"]["kernel_info_timeout"] == KERNEL_INFO_SECONDS  # a busy node's kernel
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = [line[1:].rstrip("/") for line in ignored if line.startswith("!")]
    assert ignored[1] == "*" and all(any(s == a or s.startswith(a + "/") for a in allowed) for s in sources)
    assert not any(a.split("/")[0] in ("source", "instructor", "i18n", "release") for a in allowed)


def test_the_hub_image_runs_the_pinned_jupyterhub_and_kubespawner(values):
    lines = run_lines(DEPLOY / "hub.Dockerfile")
    assert lines[0] == f"FROM quay.io/jupyterhub/k8s-hub:{z2jh_chart.CHART_VERSION}"
    (words,) = pip_installs(lines)
    assert "--no-deps" in words
    pins = dict(w.split("==") for w in words if "==" in w)
    assert pins == {name: pinned_version(name) for name in pins}
    assert {"jupyterhub", "jupyterhub-kubespawner", "jupyterhub-idle-culler"} <= set(pins)
    assert values["hub"]["image"]["tag"] == f"{z2jh_chart.CHART_VERSION}-jh{pinned_version('jupyterhub')}"
    config = (DEPLOY / "config.yaml").read_text()
    assert f"--version {z2jh_chart.CHART_VERSION}" in config
