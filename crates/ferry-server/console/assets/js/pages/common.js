// What every view shows the same way: loading, and a failure that says what failed.

import { h } from '../dom.js';

export function loading() {
  return h('p', { class: 'note' }, 'Loading…');
}

/** A failure as the API told it, in an alert so a screen reader announces it. */
export function errorBox(what, error) {
  const detail = error.describe ? error.describe() : String(error.message || error);
  const hint = error.status === 404 && error.code === 'no_route'
    ? ' This server does not have that endpoint: it may be older than this console.'
    : error.status === 403 ? ' The token may not do this.' : '';
  return h('div', { class: 'error', role: 'alert' }, h('strong', null, `${what}. `), detail, hint);
}

/** A message after an action, announced politely. */
export function outcome(text, ok = true) {
  return h('p', { class: ok ? 'ok' : 'error', role: ok ? 'status' : 'alert' }, text);
}
