// Numbers, ages and payloads as an operator reads them.

import { h } from './dom.js';

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

export function count(n) {
  return n === null || n === undefined ? '–' : integer.format(n);
}

export function rate(perSec) {
  return perSec === null || perSec === undefined ? '–' : `${decimal.format(perSec)}/s`;
}

export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i === 0 ? v : decimal.format(v)} ${units[i]}`;
}

/** A duration as one rounded unit: "850 ms", "42 s", "3 min", "5 h", "2 d". */
export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  const a = Math.abs(ms);
  if (a < 1000) return `${Math.round(a)} ms`;
  if (a < 60_000) return `${Math.round(a / 1000)} s`;
  if (a < 3_600_000) return `${Math.round(a / 60_000)} min`;
  if (a < 86_400_000) return `${Math.round(a / 3_600_000)} h`;
  return `${Math.round(a / 86_400_000)} d`;
}

export function absolute(atMs) {
  return new Date(atMs).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** When `atMs` was, as an age ("3 min") with the absolute time in its title. */
export function ago(atMs, nowMs = Date.now()) {
  if (atMs === null || atMs === undefined || atMs <= 0) return '–';
  return h('time', { datetime: new Date(atMs).toISOString(), title: absolute(atMs) }, duration(nowMs - atMs));
}

/** An age the server measured (`oldest_ready_age_ms`), with the absolute time too. */
export function age(ageMs, nowMs = Date.now()) {
  if (ageMs === null || ageMs === undefined) return '–';
  return ago(nowMs - ageMs, nowMs);
}

/**
 * A payload as text: pretty-printed when it is JSON, as it came otherwise, and a note
 * when the server could only send it as base64 (it is not UTF-8).
 */
export function payload(message) {
  if (message.payload === undefined || message.payload === null) {
    if (message.payload_base64 !== undefined && message.payload_base64 !== null) {
      return h('div', null,
        h('p', { class: 'note' }, 'Not UTF-8 text: shown as base64.'),
        h('pre', { class: 'payload' }, message.payload_base64));
    }
    return h('p', { class: 'note' }, 'No payload.');
  }
  const text = message.payload;
  try {
    const parsed = JSON.parse(text);
    if (parsed !== null && typeof parsed === 'object') {
      return h('div', null, h('p', { class: 'note' }, 'JSON, pretty-printed.'),
        h('pre', { class: 'payload' }, JSON.stringify(parsed, null, 2)));
    }
  } catch {
    // Not JSON: shown as it is.
  }
  return h('pre', { class: 'payload' }, text === '' ? '(empty)' : text);
}

/** A key as text, or its base64 with a note. */
export function key(message) {
  if (message.key !== undefined && message.key !== null) return message.key;
  if (message.key_base64 !== undefined && message.key_base64 !== null) return `${message.key_base64} (base64)`;
  return '–';
}

/** "12 min" from minutes the operator typed, as milliseconds; empty stays empty. */
export function minutesToMs(text) {
  const t = String(text ?? '').trim();
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) && n >= 0 ? Math.round(n * 60_000) : NaN;
}
