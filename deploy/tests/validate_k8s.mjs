// Validates every object of a multi-document Kubernetes YAML file against
// the API schemas packaged in npm's kubernetes-models (Kubernetes 1.3x) and
// @kubernetes-models/prometheus-operator (ServiceMonitor, PrometheusRule).
//
//   node validate_k8s.mjs MODULES_DIR FILE.yaml [FILE.yaml ...]
//
// MODULES_DIR is the node_modules folder tools/setup.sh installs them into.
// The packages' validators check types, required fields and enums but let
// unknown fields through, so a misspelt `readinesProbe` would pass: a second,
// strict pass walks each object against the packages' TypeScript interfaces
// (their .d.ts files) and refuses every field the API does not have, as
// `kubectl --validate=strict` would.
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

// --- strict pass: the interfaces' field names, from the .d.ts files -------
const ifaceCache = new Map();
function dtsPath(fromFile, spec) {
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), spec.replace(/\.js$/, "") + ".d.ts");
  return path.join(modules, spec.replace(/\.js$/, "") + ".d.ts");
}
// {props: {name: type}, imports: {Name: file}} of the interface in `file`.
function iface(file) {
  if (ifaceCache.has(file)) return ifaceCache.get(file);
  let result = null;
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, "utf8");
    const imports = {};
    for (const m of text.matchAll(/import \{([^}]*)\} from "([^"]+)"/g)) {
      for (const n of m[1].split(",").map((x) => x.trim()).filter(Boolean)) imports[n] = dtsPath(file, m[2]);
    }
    const start = text.search(/export interface I\w+( extends [\w, ]+)? \{/);
    if (start >= 0) {
      const body = text.slice(start, text.indexOf("\n}", start));
      const props = {};
      // A field's type may span lines ({ [key: string]: string; }): read to
      // the `;` outside every bracket.
      for (const m of body.matchAll(/^    "([^"]+)"\??: /gm)) {
        let depth = 0;
        let i = m.index + m[0].length;
        const from = i;
        for (; i < body.length; i++) {
          const c = body[i];
          if (c === "{" || c === "<" || c === "(") depth++;
          else if (c === "}" || c === ">" || c === ")") depth--;
          else if (c === ";" && depth === 0) break;
        }
        props[m[1]] = body.slice(from, i).replace(/\s+/g, " ");
      }
      if (/extends [^{]*TypeMeta/.test(body.split("\n")[0])) {
        props.apiVersion = "string";
        props.kind = "string";
      }
      result = { props, imports };
    }
  }
  ifaceCache.set(file, result);
  return result;
}
// Problems (unknown fields) in `data` against TypeScript type `type`,
// resolved in the context of `ctx` (an iface() result).
function strict(data, type, ctx, where, out) {
  type = type.trim();
  if (data === null || data === undefined) return;
  let m;
  if ((m = type.match(/^Array<(.+)>$/s))) {
    if (Array.isArray(data)) data.forEach((d, i) => strict(d, m[1], ctx, `${where}[${i}]`, out));
    return;
  }
  if ((m = type.match(/^\{ ?\[key: string\]: (.+?);? ?\}$/s))) {
    if (typeof data === "object") for (const [k, v] of Object.entries(data)) strict(v, m[1], ctx, `${where}.${k}`, out);
    return;
  }
  if (!/^I\w+$/.test(type) || typeof data !== "object" || Array.isArray(data)) return;
  const file = ctx.imports[type];
  const t = file && iface(file);
  if (!t) return; // an alias (IntOrString, Quantity, JSON): no fields to check
  for (const [k, v] of Object.entries(data)) {
    if (!(k in t.props)) {
      out.push(`${where}: unknown field "${k}" (known: ${Object.keys(t.props).sort().join(", ")})`);
      continue;
    }
    strict(v, t.props[k], t, `${where}.${k}`, out);
  }
}
function strictTop(doc, modelFile) {
  const t = iface(modelFile.replace(/\.js$/, ".d.ts"));
  if (!t) return [`no interface in ${modelFile.replace(/\.js$/, ".d.ts")}`];
  const out = [];
  for (const [k, v] of Object.entries(doc)) {
    if (!(k in t.props)) out.push(`${doc.kind}: unknown field "${k}"`);
    else strict(v, t.props[k], t, k, out);
  }
  return out;
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
    } catch (e) {
      console.error(`FAIL ${name}: ${e.message}`);
      failed++;
      continue;
    }
    const unknown = strictTop(doc, p);
    if (unknown.length > 0) {
      for (const u of unknown) console.error(`FAIL ${name}: ${u}`);
      failed++;
      continue;
    }
    console.log(`ok   ${name}`);
    checked++;
  }
}
console.log(`${checked} objects valid, ${failed} invalid`);
process.exit(failed > 0 || checked === 0 ? 1 : 0);
