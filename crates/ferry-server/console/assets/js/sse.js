// Server-sent events read with fetch rather than EventSource: EventSource cannot send
// the Authorization header, and a token in the URL would end up in logs.

import { authHeaders, ApiError } from './api.js';

/**
 * Reads `path` as an event stream, calling `onEvent(type, data)` for each event, until
 * the stream ends (resolves), fails (rejects) or `signal` aborts it.
 */
export async function readEvents(path, { signal, onOpen, onEvent }) {
  const response = await fetch(path, {
    headers: { Accept: 'text/event-stream', ...authHeaders() },
    signal,
    cache: 'no-store',
  });
  if (!response.ok || !response.body) {
    throw new ApiError(response.status, '', `the event stream answered ${response.status}`);
  }
  onOpen?.();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  let type = '';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    // A line ends at CR, LF or CRLF; the last piece may be a line not yet complete (a
    // lone trailing CR may be half of a CRLF, so it waits for the next chunk too).
    const lines = buffered.split(/\r\n|\n|\r(?!$)/);
    buffered = lines.pop();
    for (const line of lines) {
      if (line === '') {
        if (data.length) onEvent(type || 'message', data.join('\n'));
        type = '';
        data = [];
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') type = v;
        else if (field === 'data') data.push(v);
      }
    }
  }
}
