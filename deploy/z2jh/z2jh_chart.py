"""What the jupyterhub Helm chart's hub does with deploy/z2jh/config.yaml, for the keys that file uses:
a reproduction of the chart's `files/hub/jupyterhub_config.py` (chart 4.4.0, the version config.yaml pins)
and of its `z2jh.get_config`, so a test can build the KubeSpawner the hub would build, without a cluster.

Reproduced: the `singleuser.*` keys the chart maps to KubeSpawner traits (image, cmd, defaultUrl, uid,
fsGid, allowPrivilegeEscalation, memory and cpu guarantee/limit, extraEnv), the dynamic home volume
(storage.type dynamic, homeMountPath, capacity, access modes), extraFiles as one secret volume mounted
file by file, extraVolumes/extraVolumeMounts as lists, the `cull.*` keys as the jupyterhub-idle-culler
service and its role, `hub.config` pass-through and `hub.extraConfig` (run in the namespace the chart runs
it in).  Not reproduced: everything else the chart does (proxy, database, secrets, scheduling, network
policies, image pull secrets, the Helm templates themselves): config.yaml sets none of those keys.
Values the chart's values.yaml defaults supply and config.yaml leaves unset, the chart's defaults at 4.4.0
are given below (CHART_DEFAULTS).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import yaml

CHART_VERSION = "4.4.0"
# chart 4.4.0's values.yaml, for the keys the mapping below reads and config.yaml does not set
CHART_DEFAULTS = {
    "hub": {"config": {"JupyterHub": {"admin_access": True, "authenticator_class": "dummy"}}},
    "singleuser": {"storage": {"dynamic": {"volumeNameTemplate": "volume-{user_server}", "pvcNameTemplate": None}}},
}


def merged(defaults: dict, values: dict) -> dict:
    """Helm's merge of a values file over the chart's defaults (dicts merge, anything else replaces)."""
    out = dict(defaults)
    for key, value in values.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_values(path: Path) -> dict:
    return merged(CHART_DEFAULTS, yaml.safe_load(path.read_text()))


def getter(values: dict):
    """The chart's z2jh.get_config over these values: get_config("a.b.c", default)."""
    def get_config(key, default=None):
        value = values
        for level in key.split("."):
            if not isinstance(value, dict) or level not in value:
                return default
            value = value[level]
        return value
    return get_config


def camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


def hub_config(values: dict):
    """The traitlets Config the chart's hub builds from these values (the keys listed in the docstring)."""
    from jupyterhub.utils import url_path_join
    from traitlets.config import Config

    c = Config()
    get_config = getter(values)

    def set_if_not_none(section, trait, key):
        value = get_config(key)
        if value is not None:
            setattr(section, trait, value)

    c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
    for trait, key in (("uid", None), ("fs_gid", None), ("mem_limit", "memory.limit"),
                       ("mem_guarantee", "memory.guarantee"), ("cpu_limit", "cpu.limit"),
                       ("cpu_guarantee", "cpu.guarantee"), ("environment", "extraEnv")):
        set_if_not_none(c.KubeSpawner, trait, "singleuser." + (key or camel(trait)))
    image = get_config("singleuser.image.name")
    if image:
        tag = get_config("singleuser.image.tag")
        c.KubeSpawner.image = f"{image}:{tag}" if tag else image
    c.KubeSpawner.allow_privilege_escalation = get_config("singleuser.allowPrivilegeEscalation")

    volumes, mounts = {}, {}
    if get_config("singleuser.storage.type") == "dynamic":
        name = get_config("singleuser.storage.dynamic.volumeNameTemplate")
        if get_config("singleuser.storage.dynamic.pvcNameTemplate"):
            c.KubeSpawner.pvc_name_template = get_config("singleuser.storage.dynamic.pvcNameTemplate")
        c.KubeSpawner.storage_pvc_ensure = True
        set_if_not_none(c.KubeSpawner, "storage_access_modes", "singleuser.storage.dynamic.storageAccessModes")
        set_if_not_none(c.KubeSpawner, "storage_capacity", "singleuser.storage.capacity")
        volumes = {name: {"name": name, "persistentVolumeClaim": {"claimName": "{pvc_name}"}}}
        mounts = {name: {"mountPath": get_config("singleuser.storage.homeMountPath"), "name": name,
                         "subPath": get_config("singleuser.storage.dynamic.subPath")}}
    extra_files = get_config("singleuser.extraFiles", {})
    if extra_files:
        items = [{"key": key, "path": key, **({"mode": f["mode"]} if "mode" in f else {})}
                 for key, f in extra_files.items()]
        volumes["files"] = {"name": "files", "secret": {"secretName": "singleuser", "items": items}}
        for i, (key, f) in enumerate(extra_files.items()):
            mounts[f"{i}-files"] = {"mountPath": f["mountPath"], "subPath": key, "name": "files"}
    for volume in get_config("singleuser.storage.extraVolumes", default=[]):
        volumes[volume["name"]] = volume
    for i, mount in enumerate(get_config("singleuser.storage.extraVolumeMounts", default=[])):
        mounts[f"{i}-{mount['name']}"] = mount
    c.KubeSpawner.volumes, c.KubeSpawner.volume_mounts = volumes, mounts

    c.JupyterHub.services, c.JupyterHub.load_roles = [], []
    if get_config("cull.enabled", False):
        role = {"name": "jupyterhub-idle-culler", "services": ["jupyterhub-idle-culler"],
                "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}
        cmd = ["python3", "-m", "jupyterhub_idle_culler",
               "--url=http://localhost:8081" + url_path_join(c.JupyterHub.get("base_url", "/"), "hub/api")]
        for key, option in (("timeout", "timeout"), ("every", "cull-every"), ("concurrency", "concurrency")):
            if get_config(f"cull.{key}"):
                cmd.append(f"--{option}={get_config(f'cull.{key}')}")
        if get_config("cull.users"):
            cmd.append("--cull-users")
            role["scopes"].append("admin:users")
        if not get_config("cull.adminUsers"):
            cmd.append("--cull-admin-users=false")
        if get_config("cull.removeNamedServers"):
            cmd.append("--remove-named-servers")
        if get_config("cull.maxAge"):
            cmd.append(f"--max-age={get_config('cull.maxAge')}")
        c.JupyterHub.services.append({"name": "jupyterhub-idle-culler", "command": cmd})
        c.JupyterHub.load_roles.append(role)

    if get_config("singleuser.cmd", None) is not None:
        c.Spawner.cmd = get_config("singleuser.cmd")
    set_if_not_none(c.Spawner, "default_url", "singleuser.defaultUrl")
    for section, cfg in get_config("hub.config", {}).items():
        c[section].update(cfg)

    # hub.extraConfig runs in the chart config file's namespace, where `c` is the config and the z2jh
    # module sits beside it on sys.path
    z2jh = types.ModuleType("z2jh")
    z2jh.get_config = get_config
    saved = sys.modules.get("z2jh")
    sys.modules["z2jh"] = z2jh
    try:
        for key, source in sorted(get_config("hub.extraConfig", {}).items()):
            exec(compile(source, f"hub.extraConfig.{key}", "exec"), {"c": c, "get_config": get_config})
    finally:
        if saved is None:
            sys.modules.pop("z2jh")
        else:
            sys.modules["z2jh"] = saved
    return c


def render(hub_config, names, kubeconfig: Path) -> dict:
    """Each user's pod manifest (Kubernetes JSON) as the hub's KubeSpawner makes it before creating it:
    the pre-spawn hook, then get_pod_manifest.  KubeSpawner loads a kubeconfig when made; the one given
    names an address nobody listens on, and nothing here calls the API."""
    from jupyterhub.utils import maybe_future
    from kubernetes_asyncio.client import ApiClient
    from kubernetes_asyncio.config import kube_config
    from kubespawner import KubeSpawner

    async def one(name):
        user = SimpleNamespace(name=name, id=1, url=f"/user/{name}/", escaped_name=name, server=None)
        hub = SimpleNamespace(api_url="http://hub:8081/hub/api", base_url="/hub/", public_host="",
                              url="http://hub:8081/hub/")
        spawner = KubeSpawner(config=hub_config, user=user, hub=hub, api_token="token",
                              oauth_client_id=f"jupyterhub-user-{name}")
        await maybe_future(spawner.run_pre_spawn_hook())
        pod = await spawner.get_pod_manifest()
        async with ApiClient() as api:
            return api.sanitize_for_serialization(pod)

    async def all_of_them():
        return {name: await one(name) for name in names}

    saved, kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kube_config.KUBE_CONFIG_DEFAULT_LOCATION, str(kubeconfig)
    try:  # in a thread of its own: a browser test's event loop may hold this thread's
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, all_of_them()).result()
    finally:
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = saved
