// Debug mode: every event is checked in the browser by the gateway's own
// checker (the WebAssembly build of the schemas crate that the catalog page
// at /catalog/ serves) against the catalog the gateway enforces, and each
// verdict is reported (console.warn for a violation, and `onResult`).
// Nothing of the checker is in this bundle: the wasm-bindgen module, the
// WebAssembly and catalog.json are fetched on the first event, and only
// when `debug` is set, so the size budgets stay as they are.

/** What the checker says about one event (schemas/wasm: `Outcome`). */
export interface CheckResult {
  valid: boolean;
  event?: string;
  schema?: string;
  version?: number;
  topic?: string;
  key?: string;
  rollout?: string;
  errors: { path: string; message: string }[];
}

export interface DebugOptions {
  /** The catalog site's URL (default: the gateway's `/catalog/`); same origin as the page, or served with CORS. */
  catalog?: string;
  /** Called with each event's verdict. */
  onResult?: (result: CheckResult, event: Record<string, unknown>) => void;
}

type Check = (json: string) => string;

// `import()` through Function: the bundle targets ES2017, whose parsers
// reject the syntax; built this way it is only parsed when debug mode runs.
const load = (url: string): Promise<any> => new Function("u", "return import(u)")(url);

async function checker(catalog: string): Promise<Check> {
  const wasm = await load(new URL("wasm/eventgw_schemas_wasm.js", catalog).href);
  await wasm.default({ module_or_path: new URL("wasm/eventgw_schemas_wasm_bg.wasm", catalog).href });
  const sources = await (await fetch(new URL("catalog.json", catalog).href)).text();
  const c = new wasm.Checker(sources);
  return (json) => c.check(json);
}

/** A function checking each event it is given, once the checker has loaded. */
export function debugChecker(o: DebugOptions, host: string) {
  const base = o.catalog || host.replace(/\/+$/, "") + "/catalog/";
  let ready: Promise<Check> | undefined;
  return (event: Record<string, unknown>) => {
    ready = ready || checker(new URL(base, location.href).href);
    ready.then(
      (check) => {
        const result: CheckResult = JSON.parse(check(JSON.stringify(event)));
        if (!result.valid) console.warn("eventgw: event breaks its contract", result, event);
        if (o.onResult) o.onResult(result, event);
      },
      (e) => console.warn("eventgw: debug checker unavailable", e),
    );
  };
}
