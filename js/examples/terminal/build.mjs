// Bundles the terminal page: `node examples/terminal/build.mjs` in js/
// (after `npm run build`) writes examples/terminal/dist/terminal.js and
// terminal.css; then serve examples/terminal/ as static files.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { join } from "node:path";

const here = fileURLToPath(new URL(".", import.meta.url));

/** Builds the page's script and stylesheet into outdir (default dist/ here). */
export async function buildTerminal(outdir = join(here, "dist")) {
  await build({
    entryPoints: { terminal: join(here, "terminal.ts") },
    bundle: true,
    outdir,
    format: "esm",
    platform: "browser",
    target: "chrome120",
    external: ["ws"],
    alias: { "@procwire/client": process.env.PROCWIRE_JS_DIST ?? join(here, "../../dist/index.js") },
    loader: { ".css": "css" },
    logLevel: "error",
  });
  return outdir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(`wrote ${await buildTerminal()}`);
}
