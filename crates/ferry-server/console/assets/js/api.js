// The HTTP API with the operator's token. The token lives in sessionStorage: it is this
// tab's only, and goes when the tab closes.

const TOKEN_KEY = 'ferry.console.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** A refusal or failure from the API, with the server's code when it sent one. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }

  /** The token is missing or not accepted: only signing in again helps. */
  get unauthenticated() {
    return this.status === 401;
  }

  /** What to show: the server's words, and the status and code for a bug report. */
  describe() {
    const where = this.status ? `HTTP ${this.status}${this.code ? ` ${this.code}` : ''}` : this.code;
    return `${this.message} (${where})`;
  }
}

// Whoever shows the sign-in form listens: any call answered 401 means the token went bad.
const unauthenticatedListeners = new Set();

export function onUnauthenticated(listener) {
  unauthenticatedListeners.add(listener);
}

export function authHeaders() {
  const t = token();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

/** The API error's message, whichever of the shapes `{error, code}` or
 * `{error: {code, message}}` the server answered with. */
function errorFrom(status, statusText, body) {
  const e = body && body.error;
  if (e && typeof e === 'object') return new ApiError(status, e.code || '', e.message || statusText);
  if (typeof e === 'string') return new ApiError(status, body.code || '', e);
  return new ApiError(status, '', statusText || 'request failed');
}

export async function call(method, path, body, options = {}) {
  const headers = { Accept: 'application/json', ...authHeaders() };
  const init = { method, headers, signal: options.signal };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', `the server did not answer: ${e.message}`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = errorFrom(response.status, response.statusText, data);
    if (error.unauthenticated && !options.quietAuth) {
      for (const listener of unauthenticatedListeners) listener(error);
    }
    throw error;
  }
  return data;
}

export const get = (path, options) => call('GET', path, undefined, options);
export const post = (path, body, options) => call('POST', path, body ?? {}, options);

/** A path with each interpolated value URI-encoded: api`/v1/queues/${name}`. */
export function path(strings, ...values) {
  return strings.reduce((out, part, i) => out + part + (i < values.length ? encodeURIComponent(values[i]) : ''), '');
}

/** `?a=1&b=x` from the entries whose value is set (empty strings are left out). */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}
