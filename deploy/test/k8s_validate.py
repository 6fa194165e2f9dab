"""Validates rendered manifests offline against the Kubernetes API's own
OpenAPI schemas: api/openapi-spec/swagger.json of the k8s.io/kubernetes Go
module at the version named on the command line (scripts/helm fetches it).

Each document is checked against the definition its apiVersion and kind
name (x-kubernetes-group-version-kind), strictly: an object with declared
properties accepts no others, as the API server's strict field validation
refuses unknown fields. IntOrString and Quantity take a string or a number,
as the API server does. Kinds of other APIs (prometheus-operator's
ServiceMonitor and PrometheusRule) are listed as not validated here.

    python3 k8s_validate.py SWAGGER_JSON MANIFEST.yaml...   exit 1 on any error
    python3 k8s_validate.py SWAGGER_JSON --self-test MANIFEST.yaml
        also proves that a typo'd field and a wrong type are refused
"""

import copy
import json
import sys

import jsonschema
import yaml

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
NOT_KUBERNETES = {"monitoring.coreos.com"}


def strict(node):
    """Closes every object schema that lists its properties."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        for value in node.values():
            strict(value)
    elif isinstance(node, list):
        for value in node:
            strict(value)


class Schemas:
    def __init__(self, swagger_path):
        with open(swagger_path) as f:
            definitions = json.load(f)["definitions"]
        definitions = copy.deepcopy(definitions)
        strict(definitions)
        definitions[INT_OR_STRING] = {"type": ["string", "integer"]}
        definitions[QUANTITY] = {"type": ["string", "number"]}
        self.definitions = definitions
        self.by_kind = {}
        for name, schema in definitions.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                group = gvk["group"]
                api_version = f"{group}/{gvk['version']}" if group else gvk["version"]
                self.by_kind[(api_version, gvk["kind"])] = name
        self.validators = {}

    def validator(self, api_version, kind):
        name = self.by_kind.get((api_version, kind))
        if name is None:
            return None
        if name not in self.validators:
            root = {"definitions": self.definitions, "allOf": [{"$ref": f"#/definitions/{name}"}]}
            self.validators[name] = jsonschema.Draft4Validator(root)
        return self.validators[name]

    def errors(self, doc):
        """Problems of one manifest; None when its API is not Kubernetes'."""
        api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
        if api_version.split("/")[0] in NOT_KUBERNETES:
            return None
        validator = self.validator(api_version, kind)
        if validator is None:
            return [f"{api_version} {kind} is not served by this Kubernetes version"]
        found = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message[:200]}" for e in found]


def documents(paths):
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    yield path, doc


def self_test(schemas, docs):
    """A validator that passes everything proves nothing: break a rendered
    workload two ways and require both to be refused."""
    workload = next(d for _, d in docs if d["kind"] in ("Deployment", "StatefulSet"))
    typo = copy.deepcopy(workload)
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = typo["spec"]["template"]["spec"][
        "containers"][0].pop("readinessProbe")
    wrong_type = copy.deepcopy(workload)
    wrong_type["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "forty-five"
    for label, broken in (("unknown field readinesProbe", typo), ("string grace period", wrong_type)):
        if not schemas.errors(broken):
            sys.exit(f"self-test: the validator accepted a {workload['kind']} with a {label}")
        print(f"self-test: a {workload['kind']} with a {label} is refused")


def main():
    args = sys.argv[1:]
    swagger, args = args[0], args[1:]
    run_self_test = "--self-test" in args
    paths = [a for a in args if a != "--self-test"]
    schemas = Schemas(swagger)
    docs = list(documents(paths))
    failed, checked, skipped = 0, 0, []
    for path, doc in docs:
        errors = schemas.errors(doc)
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if errors is None:
            skipped.append(name)
            continue
        checked += 1
        for error in errors:
            print(f"{path}: {name}: {error}")
        failed += bool(errors)
    if run_self_test:
        self_test(schemas, docs)
    print(f"{checked} manifests checked against the Kubernetes schemas, {failed} invalid; "
          f"not Kubernetes' API (checked by chart_properties.py): {', '.join(skipped) or 'none'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
