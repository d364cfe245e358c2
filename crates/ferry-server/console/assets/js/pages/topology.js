// How messages flow: topics → subscriptions → queues → dead-letter queues, as a layered
// graph drawn by hand in SVG. A graph library would be larger than this layout (four
// fixed columns, one ordering pass to cut crossings, curved edges), and the page loads
// nothing but its own scripts. The same graph is also given as nested lists, for screen
// readers and for reading on a narrow screen.

import * as api from '../api.js';
import * as live from '../live.js';
import { h, s, replace } from '../dom.js';
import { href } from '../router.js';
import { errorBox, loading } from './common.js';

const LAYERS = ['topic', 'subscription', 'queue', 'dead_letter_queue'];
const LAYER_TITLES = ['Topics', 'Subscriptions', 'Queues', 'Dead-letter queues'];
const NODE_W = 210;
const GAP_X = 70;
const LINE = 15;
const PAD = 8;
const GAP_Y = 14;
const MAX_CHARS = 30;

function linkFor(node) {
  if (node.kind === 'topic') return href.topic(node.name);
  if (node.kind === 'dead_letter_queue') return href.deadLetters(node.name);
  // A subscription is a queue fed by a topic: its page is the queue's.
  return href.queue(node.name);
}

function clip(text) {
  return text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS - 1)}…` : text;
}

function lines(node) {
  const out = [{ text: clip(node.name), cls: 'node-name' }];
  if (node.filter) out.push({ text: clip(`filter: ${node.filter}`), cls: 'node-detail' });
  for (const a of node.aliases || []) out.push({ text: clip(`${a.protocol}: ${a.name}`), cls: 'node-detail' });
  return out;
}

/** Columns by kind; within a column, each node sits near the average row of the nodes
 * that feed it (one barycentre pass), which removes most crossings in these graphs. */
function layout(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const parents = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) if (parents.has(e.to) && byId.has(e.from)) parents.get(e.to).push(e.from);
  const rank = new Map();
  const columns = LAYERS.map((kind, column) => {
    const nodes = graph.nodes.filter((n) => n.kind === kind || (column === 2 && !LAYERS.includes(n.kind)));
    const weight = (n) => {
      const ranks = parents.get(n.id).map((p) => rank.get(p)).filter((r) => r !== undefined);
      return ranks.length ? ranks.reduce((a, b) => a + b, 0) / ranks.length : Infinity;
    };
    nodes.sort((a, b) => weight(a) - weight(b) || a.name.localeCompare(b.name));
    nodes.forEach((n, i) => rank.set(n.id, i));
    return nodes;
  });
  const boxes = new Map();
  let height = 0;
  columns.forEach((nodes, column) => {
    let y = 34;
    for (const n of nodes) {
      const h2 = lines(n).length * LINE + 2 * PAD;
      boxes.set(n.id, { x: 10 + column * (NODE_W + GAP_X), y, w: NODE_W, h: h2, node: n });
      y += h2 + GAP_Y;
    }
    height = Math.max(height, y);
  });
  return { columns, boxes, width: 20 + LAYERS.length * NODE_W + (LAYERS.length - 1) * GAP_X, height: height + 10 };
}

function drawing(graph) {
  const { boxes, width, height } = layout(graph);
  const svg = s('svg', {
    class: 'topology', viewBox: `0 0 ${width} ${height}`, width, height,
    role: 'group', 'aria-label': 'Topology graph: each box links to its page',
  });
  svg.append(s('defs', null, s('marker', {
    id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
  }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  LAYER_TITLES.forEach((title, column) => {
    svg.append(s('text', { x: 10 + column * (NODE_W + GAP_X), y: 18, class: 'layer-title' }, title));
  });
  for (const e of graph.edges) {
    const a = boxes.get(e.from);
    const b = boxes.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + a.w;
    const y1 = a.y + a.h / 2;
    const x2 = b.x;
    const y2 = b.y + b.h / 2;
    const bend = Math.max(30, (x2 - x1) / 2);
    svg.append(s('path', {
      d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`,
      class: `edge edge-${e.kind}`, 'marker-end': 'url(#arrow)',
    }));
  }
  for (const { x, y, w, h: boxH, node } of boxes.values()) {
    const text = lines(node).map((l, i) => s('text', { x: x + PAD, y: y + PAD + (i + 1) * LINE - 3, class: l.cls }, l.text));
    const label = [`${node.kind.replace(/_/g, ' ')} ${node.name}`,
      ...(node.filter ? [`filter ${node.filter}`] : []),
      ...(node.aliases || []).map((a) => `${a.protocol} name ${a.name}`)].join(', ');
    // Named by its visible text (name, filter, aliases), as a link should be; the full,
    // unclipped text is its description (and the list below the graph has it too).
    svg.append(s('a', { href: linkFor(node), id: `node-${node.id}`, class: `node node-${node.kind}`, 'data-node': node.id },
      s('desc', null, label),
      s('rect', { x, y, width: w, height: boxH, rx: 6 }),
      text));
  }
  return svg;
}

function asLists(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const children = new Map();
  const hasParent = new Set();
  for (const e of graph.edges) {
    if (!children.has(e.from)) children.set(e.from, []);
    children.get(e.from).push(e);
    hasParent.add(e.to);
  }
  const VERBS = { subscribes: 'subscribed by', delivers: 'delivers to', dead_letters: 'dead-letters to' };
  const item = (node, seen, verb) => h('li', null,
    verb && `${verb} `,
    h('a', { href: linkFor(node) }, node.name),
    ` (${node.kind.replace(/_/g, ' ')})`,
    node.filter && [' filter ', h('code', null, node.filter)],
    node.aliases?.length > 0 && ` — also ${node.aliases.map((a) => `${a.protocol}: ${a.name}`).join('; ')}`,
    (() => {
      const next = (children.get(node.id) || []).filter((e) => byId.has(e.to) && !seen.has(e.to));
      if (!next.length) return null;
      const nested = new Set([...seen, node.id]);
      return h('ul', null, next.map((e) => item(byId.get(e.to), nested, VERBS[e.kind] || e.kind)));
    })());
  const roots = graph.nodes.filter((n) => !hasParent.has(n.id));
  return h('ul', { class: 'tree' }, roots.map((n) => item(n, new Set([n.id]), null)));
}

export function renderTopology({ root, signal }) {
  document.title = 'Topology · Ferry console';
  const body = h('div', null, loading());
  replace(root, h('h1', { tabindex: '-1' }, 'Topology'), body);
  async function load() {
    try {
      const graph = await api.get('/v1/console/topology', { signal });
      if (graph.nodes.length === 0) {
        replace(body, h('p', { class: 'note' }, 'Nothing yet: no topics, subscriptions or queues.'));
        return;
      }
      replace(body,
        h('div', { class: 'graph-scroll', role: 'region', 'aria-label': 'Topology graph', tabindex: '0' }, drawing(graph)),
        h('section', { 'aria-labelledby': 'flows-title' }, h('h2', { id: 'flows-title' }, 'As a list'), asLists(graph)));
    } catch (e) {
      if (!signal.aborted) replace(body, errorBox('Could not read the topology', e));
    }
  }
  live.on('sample', load, signal);
  load();
}
