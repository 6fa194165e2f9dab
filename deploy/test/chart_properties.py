"""Properties of the chart's rendered manifests (`helm template` output),
each one a guarantee of the gateway that the deployment must keep:

- probes on /healthz and /readyz (HTTPS when TLS is on), a preStop pause,
  and a grace period longer than preStop + drain + in-flight + flush, read
  from the configuration the pod really gets (the ConfigMap's gateway.toml
  overridden by the container's EVENTGW__ environment, as the loader does);
- secrets only in Secrets: no key, token or password in a ConfigMap or a
  plain env value; every secret-looking variable comes from a secretKeyRef;
- the spool on: a StatefulSet, one PersistentVolumeClaim per pod, mounted
  where the spool lives; off: a Deployment and no volume claims;
- the PrometheusRule's groups equal gateway/ops/alerts.yml's; the
  ServiceMonitor scrapes the Service's port with job "eventgw";
- the catalog ConfigMap holds the catalog files byte for byte, at their paths;
- non-root, read-only root filesystem, requests and limits, a PDB, an HPA
  on CPU aimed at the workload.

    python3 chart_properties.py REPO_ROOT MANIFEST.yaml [--spool] [--tls] [--dedupe]
"""

import argparse
import pathlib
import re
import sys
import tomllib

import yaml

# The same pattern as the chart's guard on `env` (templates/_pod.tpl).
SECRET_NAME = re.compile(r"(?i)((^|__)(WRITE_KEY|HASH_KEY|REDIS_URL|SECRET)$|PASSWORD|TOKEN)")
SECRET_TOML_KEYS = {"write_key", "secret", "hash_key", "password", "pem"}
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def effective_config(configmap_toml, env):
    """The gateway's view: the file, then EVENTGW__A__B=value overrides."""
    config = tomllib.loads(configmap_toml)
    for var in env:
        if not var["name"].startswith("EVENTGW__") or "value" not in var:
            continue
        node, *path = var["name"][len("EVENTGW__"):].lower().split("__")
        keys = [node, *path]
        target = config
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
        try:
            value = tomllib.loads(f"v = {var['value']}")["v"]
        except tomllib.TOMLDecodeError:
            value = var["value"]
        target[keys[-1]] = value
    return config


def secret_toml_values(node, path=""):
    """Paths of secret-looking keys that hold a value in a TOML document."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SECRET_TOML_KEYS and value not in (None, ""):
                found.append(f"{path}{key}")
            found += secret_toml_values(value, f"{path}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += secret_toml_values(value, f"{path}{i}.")
    return found


def check_workload(docs, opts, repo):
    deployments, statefulsets = by_kind(docs, "Deployment"), by_kind(docs, "StatefulSet")
    if opts.spool:
        check(len(statefulsets) == 1 and not deployments, "spool on: exactly one StatefulSet and no Deployment")
    else:
        check(len(deployments) == 1 and not statefulsets, "spool off: exactly one Deployment and no StatefulSet")
    workload = (statefulsets or deployments)[0]
    pod = workload["spec"]["template"]["spec"]
    gateway = next(c for c in pod["containers"] if c["name"] == "gateway")
    env = gateway.get("env", [])
    configmap = next(d for d in by_kind(docs, "ConfigMap") if "gateway.toml" in d.get("data", {}))
    config = effective_config(configmap["data"]["gateway.toml"], env)
    scheme = "HTTPS" if opts.tls else "HTTP"
    port_names = {p["name"] for p in gateway["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        get = gateway.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path and get.get("port") in port_names and get.get("scheme") == scheme,
              f"{probe} is GET {path} on a named container port over {scheme}: {get}")
    pre_stop = gateway.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    check(pre_stop > 0, "a preStop pause")
    server = config["server"]
    drain, shutdown = server.get("drain_grace_secs", 0), server.get("shutdown_timeout_secs", 15)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check(drain > 0, "the gateway is configured with a drain grace (readiness red while serving)")
    check(grace > pre_stop + drain + 2 * shutdown,
          f"grace {grace} s > preStop {pre_stop} + drain {drain} + in-flight {shutdown} + flush {shutdown}")
    listen_port = int(str(server["listen"]).rsplit(":", 1)[1])
    check(any(p["containerPort"] == listen_port for p in gateway["ports"]), "the container port is the listener's")
    security = gateway.get("securityContext", {})
    check(security.get("readOnlyRootFilesystem") is True and security.get("runAsNonRoot") is True
          and security.get("allowPrivilegeEscalation") is False, "non-root, read-only root, no escalation")
    resources = gateway.get("resources", {})
    check(all(resources.get(k, {}).get(r) for k in ("requests", "limits") for r in ("cpu", "memory")),
          "cpu and memory requests and limits")
    check_spool(workload, gateway, config, opts)
    check(config.get("dedupe", {}).get("enabled", False) == opts.dedupe, f"dedupe enabled is {opts.dedupe}")
    check(("tls" in server) == opts.tls, f"TLS configured is {opts.tls}")
    check_secrets(docs, pod, configmap)
    return workload


def check_spool(workload, gateway, config, opts):
    spool = config.get("spool", {})
    check(bool(spool.get("enabled")) == opts.spool, f"spool enabled is {opts.spool}")
    claims = workload["spec"].get("volumeClaimTemplates", [])
    if not opts.spool:
        check(not claims, "no volume claims with the spool off")
        return
    check(len(claims) == 1 and claims[0]["spec"]["accessModes"] == ["ReadWriteOnce"],
          "one ReadWriteOnce claim per pod")
    mounts = {m["name"]: m["mountPath"] for m in gateway["volumeMounts"]}
    check(claims and mounts.get(claims[0]["metadata"]["name"]) == spool.get("dir"),
          f"the claim is mounted at spool.dir {spool.get('dir')}: {mounts}")
    size = claims[0]["spec"]["resources"]["requests"]["storage"]
    units = {"Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    size_bytes = int(size[:-2]) * units[size[-2:]]
    check(size_bytes > spool.get("max_bytes", 2**30), f"the volume ({size}) is larger than spool.max_bytes")


def check_secrets(docs, pod, configmap):
    for container in pod["containers"] + pod.get("initContainers", []):
        for var in container.get("env", []):
            if SECRET_NAME.search(var["name"]):
                check("secretKeyRef" in var.get("valueFrom", {}),
                      f"{container['name']}: {var['name']} comes from a Secret, not a value")
    for cm in by_kind(docs, "ConfigMap"):
        for key, text in cm.get("data", {}).items():
            if key.endswith(".toml"):
                leaked = secret_toml_values(tomllib.loads(text))
                check(not leaked, f"ConfigMap {cm['metadata']['name']}/{key} holds secrets: {leaked}")
                check("@" not in str(tomllib.loads(text).get("dedupe", {}).get("redis_url", "")),
                      "no Redis credentials in a ConfigMap")
    for secret in by_kind(docs, "Secret"):
        check(secret["metadata"]["name"].endswith("-write-key"), "the chart's only Secret is the generated write key")


def check_cluster_objects(docs, workload, repo):
    name = workload["metadata"]["name"]
    labels = workload["spec"]["selector"]["matchLabels"]
    pdbs, hpas = by_kind(docs, "PodDisruptionBudget"), by_kind(docs, "HorizontalPodAutoscaler")
    check(len(pdbs) == 1 and pdbs[0]["spec"]["selector"]["matchLabels"] == labels, "a PDB over the gateway's pods")
    for hpa in hpas:
        target = hpa["spec"]["scaleTargetRef"]
        check(target["kind"] == workload["kind"] and target["name"] == name, "the HPA scales the workload")
        check(any(m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"]), "the HPA scales on CPU")
    services = [s for s in by_kind(docs, "Service") if s["spec"].get("clusterIP") != "None"]
    check(len(services) == 1 and services[0]["spec"]["selector"] == labels, "one Service over the gateway's pods")
    monitors = by_kind(docs, "ServiceMonitor")
    check(len(monitors) == 1, "a ServiceMonitor")
    for monitor in monitors:
        port_names = {p["name"] for p in services[0]["spec"]["ports"]}
        check(all(e["port"] in port_names and e["path"] == "/metrics" for e in monitor["spec"]["endpoints"]),
              "the ServiceMonitor scrapes /metrics on the Service's port")
        job_label = monitor["spec"].get("jobLabel")
        check(services[0]["metadata"]["labels"].get(job_label) == "eventgw", "scrape job named eventgw")
    rules = by_kind(docs, "PrometheusRule")
    expected = yaml.safe_load((repo / "gateway/ops/alerts.yml").read_text())["groups"]
    check(len(rules) == 1 and rules[0]["spec"]["groups"] == expected,
          "the PrometheusRule's groups equal gateway/ops/alerts.yml's")


def check_catalog(docs, workload, repo):
    catalog = next(d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-catalog"))
    files = sorted(p.relative_to(repo / "schemas").as_posix() for pattern in ("*/catalog.toml", "*/*/*.json")
                   for p in (repo / "schemas").glob(pattern))
    pod = workload["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "catalog")
    items = {i["key"]: i["path"] for i in volume["configMap"]["items"]}
    check(sorted(items.values()) == files, f"the catalog volume lays out every catalog file: {files}")
    for key, path in items.items():
        check(catalog["data"].get(key, "").rstrip("\n") == (repo / "schemas" / path).read_text().rstrip("\n"),
              f"catalog file {path} is carried unchanged")


def main():
    args = argparse.ArgumentParser()
    args.add_argument("repo")
    args.add_argument("manifest")
    for flag in ("--spool", "--tls", "--dedupe"):
        args.add_argument(flag, action="store_true")
    opts = args.parse_args()
    repo = pathlib.Path(opts.repo)
    docs = [d for d in yaml.safe_load_all(open(opts.manifest)) if d]
    workload = check_workload(docs, opts, repo)
    check_cluster_objects(docs, workload, repo)
    check_catalog(docs, workload, repo)
    for failure in failures:
        print(f"FAIL {opts.manifest}: {failure}")
    print(f"{opts.manifest}: {len(docs)} manifests, {len(failures)} property failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
