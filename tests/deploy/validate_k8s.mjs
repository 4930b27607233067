// Validates Kubernetes objects (a JSON array on stdin) against the API schemas of kubernetes-models and
// @kubernetes-models/prometheus-operator; prints {"Kind/name": [errors]} as JSON. Besides the schema's
// own checks (types, required fields, enums, formats), a field the schema does not know is an error,
// as with `kubectl --validate=strict`: each field's value is replaced by a function, which no schema
// type accepts, and a field whose replacement draws no error at its own path is unknown.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.cwd(), "package.json"));

// apiVersion → the package directory that holds its models.
function modelPath(apiVersion, kind) {
  if (apiVersion === "monitoring.coreos.com/v1") {
    return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`;
  }
  return `kubernetes-models/${apiVersion}/${kind}`;
}

function errorsOf(Model, obj) {
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return (e.errors || [{ instancePath: "", message: e.message }]).map((x) => `${x.instancePath} ${x.message}`);
  }
}

function pointer(parts) {
  return parts.map((p) => "/" + String(p).replaceAll("~", "~0").replaceAll("/", "~1")).join("");
}

// Paths of every object field below the top-level apiVersion/kind.
function* fields(node, parts = []) {
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) yield* fields(node[i], [...parts, i]);
  } else if (node && typeof node === "object") {
    for (const key of Object.keys(node)) {
      if (parts.length > 0 || (key !== "apiVersion" && key !== "kind")) yield [...parts, key];
      yield* fields(node[key], [...parts, key]);
    }
  }
}

function unknownFields(Model, obj) {
  const out = [];
  for (const parts of fields(obj)) {
    const copy = structuredClone(obj);
    let parent = copy;
    for (const p of parts.slice(0, -1)) parent = parent[p];
    parent[parts.at(-1)] = () => {};
    const where = pointer(parts);
    if (!errorsOf(Model, copy).some((e) => e.split(" ")[0] === where)) out.push(`${where} is not a known field`);
  }
  return out;
}

const objects = JSON.parse(readFileSync(0, "utf8"));
const result = {};
for (const obj of objects) {
  const id = `${obj.kind}/${obj.metadata?.name}`;
  let Model;
  try {
    Model = require(modelPath(obj.apiVersion, obj.kind))[obj.kind];
  } catch (e) {
    result[id] = [`no schema for ${obj.apiVersion} ${obj.kind}`];
    continue;
  }
  const errors = errorsOf(Model, obj);
  result[id] = errors.length > 0 ? errors : unknownFields(Model, obj);
}
process.stdout.write(JSON.stringify(result, null, 1) + "\n");
