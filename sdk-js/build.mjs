// Builds dist/: the browser script the snippet loads (IIFE, minified), the
// npm entry points (ESM and CommonJS, for bundlers, Node and SSR), the
// minified snippet, and the type declarations.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, rmSync, mkdirSync } from "node:fs";
import { build, transform } from "esbuild";

const pkg = JSON.parse(readFileSync("package.json", "utf8"));
const common = {
  bundle: true,
  // ES2017 keeps Safari 11+ and every evergreen browser; newer syntax is lowered.
  target: "es2017",
  define: { __VERSION__: JSON.stringify(pkg.version) },
  legalComments: "none",
  logLevel: "warning",
};

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist");
await build({ ...common, entryPoints: ["src/browser.ts"], outfile: "dist/eventgw.min.js", format: "iife", minify: true });
await build({ ...common, entryPoints: ["src/index.ts"], outfile: "dist/index.mjs", format: "esm", platform: "neutral" });
await build({ ...common, entryPoints: ["src/index.ts"], outfile: "dist/index.cjs", format: "cjs", platform: "node" });
await build({ ...common, entryPoints: ["src/internal.ts"], outfile: "dist/internal.mjs", format: "esm", platform: "neutral" });

const snippet = await transform(readFileSync("src/snippet.js", "utf8"), { minify: true, target: "es5" });
writeFileSync("dist/snippet.min.js", snippet.code.trim() + "\n");

execFileSync("node_modules/.bin/tsc", ["--emitDeclarationOnly", "--outDir", "dist"], { stdio: "inherit" });
