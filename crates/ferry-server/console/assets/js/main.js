// The console's entry: sign-in, the live stream, and which view the address names.

import * as api from './api.js';
import * as live from './live.js';
import { h, replace } from './dom.js';
import { parse } from './router.js';
import { renderOverview } from './pages/overview.js';
import { renderQueue } from './pages/queue.js';
import { renderDeadLetters } from './pages/dead_letters.js';
import { renderTopic } from './pages/topic.js';
import { renderTopology } from './pages/topology.js';

const views = {
  overview: renderOverview,
  queue: renderQueue,
  deadLetters: renderDeadLetters,
  topic: renderTopic,
  topology: renderTopology,
  missing: renderMissing,
};

const el = {
  nav: document.getElementById('nav'),
  live: document.getElementById('live'),
  signOut: document.getElementById('sign-out'),
  signin: document.getElementById('signin'),
  login: document.getElementById('login'),
  token: document.getElementById('token'),
  loginMessage: document.getElementById('login-message'),
  view: document.getElementById('view'),
  main: document.getElementById('main'),
};

let signedIn = false;
let leaving = null;

function renderMissing({ root }) {
  replace(root,
    h('h1', { tabindex: '-1' }, 'Nothing here'),
    h('p', null, 'This address names no view of the console. ', h('a', { href: '#/' }, 'Go to the overview'), '.'));
}

/** Whether the API takes this tab's token (or needs none): 401/403 say it does not. */
async function accepted() {
  const refused = (e) => e.status === 401 || e.status === 403;
  try {
    await api.get('/v1/console/overview?limit=1', { quietAuth: true });
  } catch (e) {
    if (refused(e)) throw e;
    // A server without the console's endpoints answers 404 before checking any token:
    // ask a call every server has, so the sign-in still appears when one is needed.
    if (e.status === 404) {
      try {
        await api.get('/v1/queues', { quietAuth: true });
      } catch (other) {
        if (refused(other)) throw other;
      }
    }
    // Any other failure is the views' to show; the token was not what failed.
  }
  return true;
}

function showSignIn(message) {
  signedIn = false;
  leaving?.abort();
  leaving = null;
  live.stop();
  el.view.replaceChildren();
  el.nav.hidden = true;
  el.signOut.hidden = true;
  el.signin.hidden = false;
  el.loginMessage.replaceChildren();
  if (message) el.loginMessage.append(h('p', { role: 'alert', class: 'error' }, message));
  document.title = 'Sign in · Ferry console';
  el.token.focus();
}

function enter() {
  signedIn = true;
  el.signin.hidden = true;
  el.nav.hidden = false;
  el.signOut.hidden = api.token() === '';
  live.start(el.live);
  route(false);
}

function route(moveFocus) {
  if (!signedIn) return;
  leaving?.abort();
  leaving = new AbortController();
  const target = parse(location.hash);
  for (const link of el.nav.querySelectorAll('a')) {
    const view = link.getAttribute('href') === '#/topology' ? 'topology' : 'overview';
    if (view === target.view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const root = h('div', { class: 'page' });
  el.view.replaceChildren(root);
  views[target.view]({ root, name: target.name, signal: leaving.signal });
  if (moveFocus) root.querySelector('h1')?.focus();
}

function refused(error) {
  return `The server refused this token: ${error.describe()}`;
}

el.login.addEventListener('submit', async (event) => {
  event.preventDefault();
  const value = el.token.value.trim();
  if (!value) return;
  api.setToken(value);
  try {
    await accepted();
    el.token.value = '';
    enter();
  } catch (e) {
    api.clearToken();
    showSignIn(refused(e));
  }
});

el.signOut.addEventListener('click', () => {
  api.clearToken();
  showSignIn(null);
});

document.getElementById('skip').addEventListener('click', (event) => {
  // The address holds the view: the skip link moves focus without changing it.
  event.preventDefault();
  el.main.focus();
});

api.onUnauthenticated((error) => {
  if (!signedIn) return;
  api.clearToken();
  showSignIn(refused(error));
});

window.addEventListener('hashchange', () => route(true));

(async () => {
  try {
    await accepted();
    enter();
  } catch (e) {
    const saved = api.token() !== '';
    api.clearToken();
    showSignIn(saved ? refused(e) : null);
  }
})();
