// Parse Mermaid text with Mermaid's own parser: node parse_mermaid.mjs FILE. Exit 0 when it parses, 1 with the
// parser's message when it does not, 2 on bad usage.
import { readFileSync } from "node:fs";
import { JSDOM } from "jsdom";

if (process.argv.length !== 3) {
  console.error("usage: node parse_mermaid.mjs FILE");
  process.exit(2);
}
// Mermaid sanitizes labels with DOMPurify, which needs a DOM: jsdom's window stands in for a browser's.
const { window } = new JSDOM("");
globalThis.window = window;
globalThis.document = window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
const text = readFileSync(process.argv[2], "utf8");
try {
  const result = await mermaid.parse(text);
  console.log(result.diagramType);
} catch (error) {
  console.error(String(error.message ?? error).split("\n").slice(0, 6).join("\n"));
  process.exit(1);
}
