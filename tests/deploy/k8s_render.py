"""Renders kustomizations with `kubectl kustomize` and validates the objects against the Kubernetes
schemas (kubernetes-models, @kubernetes-models/prometheus-operator) with validate_k8s.mjs."""
import json
import os
import subprocess

import yaml

import npm_tools

HERE = os.path.dirname(os.path.abspath(__file__))


def render(directory):
    """The objects `kubectl kustomize DIRECTORY` renders."""
    r = subprocess.run(["kubectl", "kustomize", directory], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [o for o in yaml.safe_load_all(r.stdout) if o]


def validate(objects, npm_dir):
    """{"Kind/name": [schema errors]} for every object (an empty list: valid; unknown fields are errors)."""
    modules = npm_tools.ensure(npm_dir)
    r = subprocess.run(["node", os.path.join(HERE, "validate_k8s.mjs")], input=json.dumps(objects),
                       capture_output=True, text=True, timeout=120, env={**os.environ, "NODE_PATH": modules},
                       cwd=os.path.dirname(modules))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def find(objects, kind, name=None):
    """The one object of `kind` (and `name`)."""
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
    return found[0]
