// Preload for the conformance CLI (server leg), used by scripts/conformance.py: adds
// "Authorization: Bearer $MCP_CONFORMANCE_BEARER" to every HTTP request the harness makes, since
// the harness has no option for credentials and /mcp requires a token.
//  - global fetch: the SDK client transport and the stateless (2026-07-28) raw requests
//  - undici.request: dns-rebinding-protection (patched on the copy of undici the conformance
//    bundle resolves, before the bundle imports it)
//  - node:http request(options, cb): http-header-validation (exact header casing)
import { createRequire } from 'node:module';
import http from 'node:http';

const token = process.env.MCP_CONFORMANCE_BEARER;
if (token) {
  const auth = `Bearer ${token}`;
  const hasAuth = (h) => Object.keys(h).some((k) => k.toLowerCase() === 'authorization');
  const origFetch = globalThis.fetch;
  globalThis.fetch = (input, init = {}) => {
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has('authorization')) headers.set('authorization', auth);
    return origFetch(input, { ...init, headers });
  };
  try {
    const undici = createRequire(process.argv[1])('undici');
    const origRequest = undici.request;
    undici.request = (url, opts = {}) => {
      const h = { ...(opts.headers ?? {}) };
      if (!hasAuth(h)) h.authorization = auth;
      return origRequest(url, { ...opts, headers: h });
    };
  } catch { /* undici not resolvable from the entry point: fetch-only mode */ }
  const origHttpRequest = http.request;
  http.request = function (options, ...rest) {
    if (options && typeof options === 'object' && !(options instanceof URL)) {
      const h = { ...(options.headers ?? {}) };
      if (!hasAuth(h)) h.authorization = auth;
      options = { ...options, headers: h };
    }
    return origHttpRequest.call(this, options, ...rest);
  };
}
