// Calls to the JSON routes of the same origin. Every call carries the token (authorization:
// Bearer) when one is known and the tenant picked in the switcher (x-eragraph-tenant) when there
// is one; every POST sends content-type: application/json. A 401 asks for a token. On a local
// store (eragraph serve) the operator may ask as other principals: x-eragraph-as.

const TOKEN_KEY = "eragraph.token";
const TENANT_KEY = "eragraph.tenant";
const AS_KEY = "eragraph.as";
let onUnauthorized = () => {};

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
  // A list route of the console's contract that this server does not serve yet (404 on a
  // route that takes no id).
  get missingRoute() {
    return this.status === 404;
  }
}

// #token=T in the URL: kept in sessionStorage and removed from the address bar.
export function takeTokenFromUrl() {
  const match = location.hash.match(/(?:^#|&)token=([^&]*)/);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  const rest = location.hash.replace(/(^#|&)token=[^&]*/, "$1").replace(/^#&/, "#").replace(/&$/, "");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => (value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY)),
};
export const tenant = {
  get: () => sessionStorage.getItem(TENANT_KEY),
  set: (value) => (value ? sessionStorage.setItem(TENANT_KEY, value) : sessionStorage.removeItem(TENANT_KEY)),
};

// The principals the operator asks as ("group:finance,user:alice"; none: the operator, everything).
export const asking = {
  get: () => sessionStorage.getItem(AS_KEY),
  set: (value) => (value ? sessionStorage.setItem(AS_KEY, value) : sessionStorage.removeItem(AS_KEY)),
};

export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

function headers(json) {
  const out = {};
  if (json) out["content-type"] = "application/json";
  const bearer = token.get();
  if (bearer) out.authorization = "Bearer " + bearer;
  const picked = tenant.get();
  if (picked) out["x-eragraph-tenant"] = picked;
  const as = asking.get();
  if (as) out["x-eragraph-as"] = as;
  return out;
}

// The words of an error body: {"message"}, or a validation error's {"detail": [{loc, msg}]}.
export function messageOf(body, status) {
  if (body && typeof body.message === "string" && !Array.isArray(body.detail)) return body.message;
  if (body && Array.isArray(body.detail)) {
    return body.detail.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".") || "request"}: ${d.msg}`).join("; ");
  }
  if (body && typeof body.message === "string") return body.message;
  return `the server answered ${status}`;
}

async function send(method, path, body) {
  const init = { method, headers: headers(body !== undefined) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, `the server did not answer (${error.message})`);
  }
  return response;
}

async function failure(response) {
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = { message: text.slice(0, 300) };
  }
  if (response.status === 401) onUnauthorized();
  return new ApiError(response.status, messageOf(body, response.status), body);
}

export async function request(method, path, body) {
  const response = await send(method, path, body);
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body);
export const del = (path) => request("DELETE", path);

// POST path with body, read as NDJSON: yields each line's object as it arrives.
export async function* ndjson(path, body) {
  const response = await send("POST", path, body);
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let cut;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, cut).trim();
      buffer = buffer.slice(cut + 1);
      if (line) yield JSON.parse(line);
    }
    if (done) break;
  }
  if (buffer.trim()) yield JSON.parse(buffer);
}

// GET /stats, shared by the views for a few seconds (a large store counts its layers for a second
// or so); forgotten when the store changes (an upload settles, a delete, another tenant).
const STATS_MS = 5000;
let statsRead = null;
export function stats({ fresh = false } = {}) {
  if (fresh || !statsRead || performance.now() - statsRead.at > STATS_MS) {
    const read = { at: performance.now(), body: get("/stats") };
    read.body.catch(() => { if (statsRead === read) statsRead = null; });
    statsRead = read;
  }
  return statsRead.body;
}

// The store changed under the console (an upload reached a settled state, a document was
// deleted, another tenant was picked): the stats are read again, and whoever listens is told.
export function changed() {
  statsRead = null;
  window.dispatchEvent(new CustomEvent("eragraph:changed"));
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? "?" + text : "";
}
