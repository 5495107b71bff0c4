// The master's REST API, with the bearer token from the tab's session storage.
//
// The token lives only in sessionStorage and in the Authorization header: it is
// never written into the page, a URL or a log.

const TOKEN_KEY = "fleet.token";
export const API = "/api/v1";

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An HTTP error from the API: `status` and the JSON `detail` (string or list). */
export class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : `HTTP ${status}`);
    this.status = status;
    this.detail = detail;
  }

  /** FastAPI validation errors as [{loc: [...], msg}] (empty for other errors). */
  get fieldErrors() {
    return Array.isArray(this.detail) ? this.detail : [];
  }

  /** One readable line for the whole error. */
  get summary() {
    if (this.status === 403) return "Not allowed with this token (admin token needed).";
    if (typeof this.detail === "string") return this.detail;
    if (Array.isArray(this.detail)) {
      return this.detail.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("; ");
    }
    return `HTTP ${this.status}`;
  }
}

/** Tell the app the token is gone or wrong (it shows the sign-in form). */
export function signalUnauthorized(message) {
  window.dispatchEvent(new CustomEvent("fleet:unauthorized", { detail: message }));
}

/**
 * Call the API.
 *
 * @param {string} path - below /api/v1, e.g. "/automations"
 * @param {{method?: string, body?: any, token?: string, signal?: AbortSignal}} [opts]
 * @returns {Promise<any>} the decoded JSON body (null when empty)
 * @throws {ApiError} on any non-2xx answer (401 also signals sign-out)
 */
export async function api(path, opts = {}) {
  const token = opts.token || getToken();
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method: opts.method || "GET", headers, cache: "no-store" };
  if (opts.signal) init.signal = opts.signal; // a Refresher's stop() aborts it
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetch(API + path, init);
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text };
    }
  }
  if (!res.ok) {
    const detail = data && data.detail !== undefined ? data.detail : res.statusText;
    const err = new ApiError(res.status, detail);
    if (res.status === 401 && !opts.token) signalUnauthorized("Your token was refused; sign in again.");
    throw err;
  }
  return data;
}

/** True for the error of a request its view aborted (see refresh.js): not a failure to show. */
export function aborted(err) {
  return Boolean(err && err.name === "AbortError");
}

/** Path segment for a type, worker or pool name. */
export function seg(name) {
  // "." and ".." would be path steps to the browser: quoted, they stay names.
  if (name === "." || name === "..") return name.replace(/\./g, "%2E");
  return encodeURIComponent(name);
}
