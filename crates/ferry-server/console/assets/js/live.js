// Live updates: one event stream for the whole page. Pages subscribe to `sample` (the
// server took a new sample: re-read what is shown) and `redrive` (a redrive job moved).
// When the stream is down the page still refreshes: every ten seconds it acts as if a
// sample had come, and it reconnects with a growing pause.

import { readEvents } from './sse.js';

const FALLBACK_REFRESH_MS = 10_000;
const RECONNECT_MAX_MS = 30_000;

const listeners = { sample: new Set(), redrive: new Set() };
let controller = null;
let fallbackTimer = null;
let statusEl = null;

function emit(type, data) {
  for (const listener of listeners[type] || []) {
    try {
      listener(data);
    } catch (e) {
      console.error(e);
    }
  }
}

function show(text, state) {
  if (!statusEl) return;
  statusEl.textContent = text;
  statusEl.dataset.state = state;
}

function startFallback() {
  if (fallbackTimer === null) {
    fallbackTimer = setInterval(() => emit('sample', null), FALLBACK_REFRESH_MS);
  }
}

function stopFallback() {
  clearInterval(fallbackTimer);
  fallbackTimer = null;
}

/**
 * `fn` at most once per `ms`, the last call always running (after the pause): a redrive
 * reports progress many times a second, and a view needs re-reading only now and then.
 */
export function throttle(fn, ms) {
  let last = 0;
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    const wait = last + ms - Date.now();
    if (wait <= 0) {
      last = Date.now();
      fn(...args);
    } else {
      timer = setTimeout(() => {
        last = Date.now();
        fn(...args);
      }, wait);
    }
  };
}

/** Re-reads a view after each sample, and while a redrive moves messages. */
export function onChange(reload, signal) {
  on('sample', reload, signal);
  const moved = throttle(reload, 2000);
  on('redrive', () => {
    if (!signal.aborted) moved();
  }, signal);
}

/** Listens to `type` until `signal` aborts (the page that listened was left). */
export function on(type, listener, signal) {
  listeners[type].add(listener);
  signal?.addEventListener('abort', () => listeners[type].delete(listener));
}

export function start(status) {
  statusEl = status;
  stop();
  controller = new AbortController();
  const { signal } = controller;
  let pause = 1000;
  (async () => {
    while (!signal.aborted) {
      show('Connecting…', 'connecting');
      try {
        await readEvents('/v1/console/events', {
          signal,
          onOpen: () => {
            pause = 1000;
            stopFallback();
            show('Live', 'live');
          },
          onEvent: (type, data) => {
            let parsed = null;
            try {
              parsed = JSON.parse(data);
            } catch {
              return;
            }
            emit(type, parsed);
          },
        });
      } catch (e) {
        if (signal.aborted) return;
        console.warn('event stream:', e.message);
      }
      if (signal.aborted) return;
      startFallback();
      show('Live updates unavailable: refreshing every 10 s', 'polling');
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, RECONNECT_MAX_MS);
    }
  })();
}

export function stop() {
  controller?.abort();
  controller = null;
  stopFallback();
  show('', 'off');
}
