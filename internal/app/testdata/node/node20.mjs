// Loads @modelcontextprotocol/conformance on Node.js 20, the machines'
// (node --import ./node20.mjs): the suite imports fs.globSync, which
// Node.js 22 added, for its tier-check command alone, which the tests do
// not run. On Node.js 22 it does nothing.
import fs from "node:fs";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

const shim = "data:text/javascript," + encodeURIComponent(
  'export * from "node:fs"; export { default } from "node:fs";' +
  'export function globSync() { throw new Error("fs.globSync needs Node.js 22"); }');

// resolve gives the suite, and it alone, node:fs with a globSync.
export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("/@modelcontextprotocol/conformance/")) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}

if (isMainThread && !fs.globSync) {
  register(import.meta.url);
}
