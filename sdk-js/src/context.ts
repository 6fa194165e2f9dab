// The automatic context every event carries. Each browser global is looked up
// when an event is made, never at import, so the module loads in Node and in
// server-side rendering; whatever a runtime lacks is simply left out.

declare const __VERSION__: string;

export const LIBRARY = { name: "eventgw-js", version: typeof __VERSION__ == "string" ? __VERSION__ : "dev" };

type Dict = Record<string, unknown>;

/** url, path, referrer, title and search of the current page: the `page` call's properties. */
export function pageInfo(): Dict {
  if (typeof location == "undefined") return {};
  const d = typeof document != "undefined" ? document : undefined;
  return {
    url: location.href.split("#")[0],
    path: location.pathname,
    referrer: d ? d.referrer : "",
    title: d ? d.title : "",
    search: location.search,
  };
}

/** utm_* query parameters, named as Segment's spec names them (utm_campaign is `name`). */
export function campaign(search: string): Dict | undefined {
  const c: Dict = {};
  let any = false;
  search.replace(/[?&]utm_(\w+)=([^&]*)/g, (_, k: string, v: string) => {
    try {
      c[k == "campaign" ? "name" : k] = decodeURIComponent(v.replace(/\+/g, " "));
      any = true;
    } catch (e) {
      /* malformed escape: skip that parameter */
    }
    return "";
  });
  return any ? c : undefined;
}

export function autoContext(): Dict {
  const c: Dict = { library: LIBRARY };
  try {
    const o = Intl.DateTimeFormat().resolvedOptions();
    c.timezone = o.timeZone;
    c.locale = o.locale;
  } catch (e) {
    /* no Intl: leave both out */
  }
  if (typeof navigator != "undefined" && navigator.language) c.locale = navigator.language;
  if (typeof location != "undefined") {
    c.page = pageInfo();
    const utm = campaign(location.search);
    if (utm) c.campaign = utm;
  }
  if (typeof screen != "undefined") {
    c.screen = { width: screen.width, height: screen.height, density: globalThis.devicePixelRatio };
  }
  return c;
}
