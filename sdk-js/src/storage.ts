// Every storage access is guarded: Safari private mode, disabled cookies,
// sandboxed iframes and full quotas all throw, and a tracking SDK must never
// break the page it runs on. A failed read is "nothing stored"; a failed
// write reports false so the caller can keep the data in memory instead.

export interface Store {
  get(key: string): string | null;
  set(key: string, value: string): boolean;
  del(key: string): void;
}

/** Memory only: the cookie-less mode, Node, and browsers without usable storage. */
export function memoryStore(): Store {
  const m: Record<string, string> = {};
  return {
    get: (k) => (k in m ? m[k] : null),
    set: (k, v) => ((m[k] = v), true),
    del: (k) => void delete m[k],
  };
}

/** localStorage when it exists and accepts a write; undefined otherwise. */
export function localStore(): Store | undefined {
  try {
    const ls = globalThis.localStorage;
    const probe = "eventgw.probe";
    ls.setItem(probe, "1");
    ls.removeItem(probe);
    return {
      get(k) {
        try {
          return ls.getItem(k);
        } catch (e) {
          return null;
        }
      },
      set(k, v) {
        try {
          ls.setItem(k, v);
          return true;
        } catch (e) {
          return false; // quota exceeded, or storage revoked since the probe
        }
      },
      del(k) {
        try {
          ls.removeItem(k);
        } catch (e) {
          /* nothing to do: the value simply stays */
        }
      },
    };
  } catch (e) {
    return undefined;
  }
}

export interface CookieOptions {
  /** e.g. "example.com" to share the id with every subdomain; the page's host by default. */
  domain?: string;
  /** Lifetime in days; 365 by default. */
  days?: number;
}

/** A first-party cookie; Secure on https, SameSite=Lax so it is never sent cross-site. */
export function cookieStore(o: CookieOptions): Store {
  const doc = () => (typeof document !== "undefined" ? document : undefined);
  const write = (k: string, v: string, days: number) => {
    const d = doc();
    if (!d) return false;
    try {
      let c = `${k}=${encodeURIComponent(v)}; path=/; max-age=${days * 86400}; samesite=lax`;
      if (o.domain) c += `; domain=${o.domain}`;
      if (location.protocol == "https:") c += "; secure";
      d.cookie = c;
      return true;
    } catch (e) {
      return false;
    }
  };
  return {
    get(k) {
      try {
        const m = (doc()?.cookie || "").match(new RegExp(`(?:^|; )${k}=([^;]*)`));
        return m ? decodeURIComponent(m[1]) : null;
      } catch (e) {
        return null;
      }
    },
    set: (k, v) => write(k, v, o.days || 365),
    del: (k) => void write(k, "", 0),
  };
}
