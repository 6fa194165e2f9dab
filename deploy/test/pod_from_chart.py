"""Lays out what the chart's gateway pod would get, so the image can run
with exactly that: the ConfigMaps' files at their mount paths (the catalog
through its `items`) and the container's environment, with each Secret
reference filled from --secret NAME=VALUE, each Secret volume from --secret-dir VOLUME=DIR,
and any variable replaced by --set NAME=VALUE (the local Kafka's address,
a loopback listener).

    python3 pod_from_chart.py MANIFEST.yaml OUTDIR [--set N=V]... [--secret N=V]... [--secret-dir V=DIR]...

Writes OUTDIR/mounts (one `HOSTPATH:MOUNTPATH` a line) and OUTDIR/env
(`NAME=VALUE` lines for podman --env-file). Fails on a Secret reference
without a value, or a volume it cannot lay out.
"""

import argparse
import pathlib
import sys

import yaml


def lay_out(root, files):
    """As the kubelet writes a ConfigMap volume: the files under a timestamped
    directory, `..data` linking to it, and each top-level entry a link
    through `..data` (so the loader must tolerate the dot directories)."""
    stamp = root / "..2026_01_01_00_00_00.000000001"
    for path, text in files.items():
        target = stamp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "..data").symlink_to(stamp.name)
    for top in sorted({p.split("/")[0] for p in files}):
        (root / top).symlink_to(f"..data/{top}")


def main():
    args = argparse.ArgumentParser()
    args.add_argument("manifest")
    args.add_argument("out")
    args.add_argument("--set", action="append", default=[])
    args.add_argument("--secret", action="append", default=[])
    args.add_argument("--secret-dir", action="append", default=[])
    opts = args.parse_args()
    secret_dirs = dict(s.split("=", 1) for s in opts.secret_dir)
    docs = [d for d in yaml.safe_load_all(open(opts.manifest)) if d]
    configmaps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    workload = next(d for d in docs if d["kind"] in ("Deployment", "StatefulSet"))
    pod = workload["spec"]["template"]["spec"]
    gateway = next(c for c in pod["containers"] if c["name"] == "gateway")
    out = pathlib.Path(opts.out)
    mounts = []
    for volume in pod["volumes"]:
        mount = next((m for m in gateway["volumeMounts"] if m["name"] == volume["name"]), None)
        if mount is None or "emptyDir" in volume:
            continue
        if "secret" in volume:
            if volume["name"] not in secret_dirs:
                sys.exit(f"volume {volume['name']} is Secret {volume['secret']['secretName']}: "
                         f"give its files with --secret-dir {volume['name']}=DIR")
            mounts.append(f"{secret_dirs[volume['name']]}:{mount['mountPath']}")
            continue
        if "configMap" not in volume:
            sys.exit(f"volume {volume['name']} is neither a ConfigMap nor a Secret")
        data = configmaps[volume["configMap"]["name"]]
        items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
        lay_out(out / volume["name"], {item["path"]: data[item["key"]] for item in items})
        mounts.append(f"{out / volume['name']}:{mount['mountPath']}")
    overrides = dict(s.split("=", 1) for s in opts.set)
    secrets = dict(s.split("=", 1) for s in opts.secret)
    lines = []
    for var in gateway["env"]:
        name = var["name"]
        if name in overrides:
            value = overrides.pop(name)
        elif "value" in var:
            value = var["value"]
        elif name in secrets:
            value = secrets[name]
        else:
            sys.exit(f"{name} comes from {var.get('valueFrom')}: give it with --secret {name}=VALUE")
        lines.append(f"{name}={value}")
    lines += [f"{name}={value}" for name, value in overrides.items()]
    (out / "env").write_text("".join(line + "\n" for line in lines))
    (out / "mounts").write_text("".join(m + "\n" for m in mounts))
    print(f"pod of {workload['kind']}/{workload['metadata']['name']}: {len(lines)} variables, mounts {mounts}")


if __name__ == "__main__":
    main()
