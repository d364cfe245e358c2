// Hash routes, so the server serves one page for every view and a view's address can
// be bookmarked: #/ · #/queues/<name> · #/queues/<name>/dead-letters · #/topics/<name>
// · #/topology. Names are URI-encoded, so a name with a slash stays one segment.

const enc = encodeURIComponent;

export const href = {
  overview: () => '#/',
  queue: (name) => `#/queues/${enc(name)}`,
  deadLetters: (name) => `#/queues/${enc(name)}/dead-letters`,
  topic: (name) => `#/topics/${enc(name)}`,
  topology: () => '#/topology',
};

/** The view `hash` names: `{view, name}`, or `{view: 'missing'}`. */
export function parse(hash) {
  const raw = hash.replace(/^#/, '').replace(/^\//, '');
  let parts;
  try {
    parts = raw === '' ? [] : raw.split('/').map(decodeURIComponent);
  } catch {
    return { view: 'missing' };
  }
  if (parts.length === 0) return { view: 'overview' };
  if (parts.length === 1 && parts[0] === 'topology') return { view: 'topology' };
  if (parts[0] === 'queues' && parts.length === 2 && parts[1]) return { view: 'queue', name: parts[1] };
  if (parts[0] === 'queues' && parts.length === 3 && parts[1] && parts[2] === 'dead-letters') {
    return { view: 'deadLetters', name: parts[1] };
  }
  if (parts[0] === 'topics' && parts.length === 2 && parts[1]) return { view: 'topic', name: parts[1] };
  return { view: 'missing' };
}
