// Validates every object of a multi-document Kubernetes YAML file against
// the API schemas packaged in npm's kubernetes-models (Kubernetes 1.3x) and
// @kubernetes-models/prometheus-operator (ServiceMonitor, PrometheusRule).
//
//   node validate_k8s.mjs MODULES_DIR FILE.yaml [FILE.yaml ...]
//
// MODULES_DIR is the node_modules folder tools/setup.sh installs them into.
// Prints one line per object; exits 1 naming each object that fails (and
// why), or whose apiVersion/kind has no schema.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, ...files] = process.argv.slice(2);
if (!modules || files.length === 0) {
  console.error("usage: node validate_k8s.mjs MODULES_DIR FILE.yaml...");
  process.exit(2);
}
const yaml = (await import(pathToFileURL(path.join(modules, "js-yaml", "index.js")))).default;

function modulePath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") {
    return path.join(modules, "@kubernetes-models", "prometheus-operator", group, version, `${kind}.js`);
  }
  // Core objects live under v1/, apps/v1 under apps/v1/, and so on.
  return path.join(modules, "kubernetes-models", group === "" ? "" : group, version, `${kind}.js`);
}

let failed = 0;
let checked = 0;
for (const file of files) {
  const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d != null);
  for (const doc of docs) {
    const name = `${path.basename(file)}: ${doc.kind}/${doc.metadata?.name}`;
    if (!doc.apiVersion || !doc.kind) {
      console.error(`FAIL ${name}: no apiVersion or kind`);
      failed++;
      continue;
    }
    const p = modulePath(doc.apiVersion, doc.kind);
    if (!fs.existsSync(p)) {
      console.error(`FAIL ${name}: no schema for ${doc.apiVersion} ${doc.kind} (${p})`);
      failed++;
      continue;
    }
    const mod = await import(pathToFileURL(p));
    const Model = mod[doc.kind];
    try {
      new Model(doc).validate();
      console.log(`ok   ${name}`);
      checked++;
    } catch (e) {
      console.error(`FAIL ${name}: ${e.message}`);
      failed++;
    }
  }
}
console.log(`${checked} objects valid, ${failed} invalid`);
process.exit(failed > 0 || checked === 0 ? 1 : 0);
