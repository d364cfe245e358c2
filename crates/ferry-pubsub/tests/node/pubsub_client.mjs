// Google's Node.js client for Pub/Sub (@google-cloud/pubsub) against Ferry's front end.
//
// Run with PUBSUB_EMULATOR_HOST set to the front end's address: the client then speaks
// plaintext gRPC without credentials, as it does to Google's emulator. Prints "every check
// passed" at the end; a failed check throws.

import {PubSub} from '@google-cloud/pubsub';

const pubsub = new PubSub({projectId: 'ferry-node'});

function check(condition, what) {
  if (!condition) {
    throw new Error(`check failed: ${what}`);
  }
}

async function refusedWith(code, call, what) {
  try {
    await call();
  } catch (e) {
    check(e.code === code, `${what}: code ${e.code} (${e.message})`);
    return;
  }
  throw new Error(`${what} succeeded`);
}

const ALREADY_EXISTS = 6;
const NOT_FOUND = 5;
const UNIMPLEMENTED = 12;

const [topic] = await pubsub.createTopic('orders');
await refusedWith(ALREADY_EXISTS, () => pubsub.createTopic('orders'), 'a second createTopic');
const [subscription] = await topic.createSubscription('ordered', {
  enableMessageOrdering: true,
  ackDeadlineSeconds: 20,
});
const [metadata] = await subscription.getMetadata();
check(metadata.topic === topic.name, `subscription topic ${metadata.topic}`);
check(metadata.enableMessageOrdering === true, 'ordering enabled');
check(metadata.ackDeadlineSeconds === 20, `ack deadline ${metadata.ackDeadlineSeconds}`);
const [topics] = await pubsub.getTopics();
check(
  topics.length === 1 && topics[0].name === topic.name,
  `topics: ${topics.map(t => t.name)}`,
);
await refusedWith(
  UNIMPLEMENTED,
  () => topic.createSubscription('pushed', {pushConfig: {pushEndpoint: 'http://127.0.0.1:9/push'}}),
  'a push subscription',
);
await refusedWith(
  NOT_FOUND,
  () => pubsub.topic('nowhere').publishMessage({data: Buffer.from('x')}),
  'a publish to a missing topic',
);

// Publish with ordering keys: two keys, interleaved.
const ordered = pubsub.topic('orders', {messageOrdering: true});
const KEYS = ['customer-1', 'customer-2'];
const PER_KEY = 25;
const published = [];
for (let i = 0; i < PER_KEY; i++) {
  for (const key of KEYS) {
    published.push(
      ordered.publishMessage({
        data: Buffer.from(`${key}:${i}`),
        orderingKey: key,
        attributes: {seq: String(i)},
      }),
    );
  }
}
const ids = await Promise.all(published);
check(new Set(ids).size === ids.length, 'message ids are unique');

// A streaming pull under flow control: each key in order, never more than five held.
const received = new Map(KEYS.map(k => [k, []]));
let outstanding = 0;
let mostOutstanding = 0;
const reader = pubsub.subscription('ordered', {flowControl: {maxMessages: 5, allowExcessMessages: false}});
const all = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('the streaming pull stalled')), 60_000);
  reader.on('error', reject);
  reader.on('message', message => {
    outstanding += 1;
    mostOutstanding = Math.max(mostOutstanding, outstanding);
    setTimeout(() => {
      const [key, number] = message.data.toString().split(':');
      check(message.orderingKey === key, `ordering key ${message.orderingKey} for ${key}`);
      check(message.attributes.seq === number, 'attributes arrive');
      received.get(key).push(Number(number));
      outstanding -= 1;
      message.ack();
      if ([...received.values()].every(v => v.length === PER_KEY)) {
        clearTimeout(timer);
        resolve();
      }
    }, 5);
  });
});
await all;
await reader.close();
for (const key of KEYS) {
  const got = received.get(key);
  check(
    got.every((n, i) => n === i),
    `${key} in order: ${got}`,
  );
}
check(mostOutstanding <= 5, `flow control: ${mostOutstanding} outstanding`);

// A filter in Pub/Sub's syntax, on a topic of its own: only matching messages arrive.
const [events] = await pubsub.createTopic('events');
const FILTER = 'attributes.kind = "paid" OR hasPrefix(attributes.kind, "refund-")';
const [filtered] = await events.createSubscription('filtered', {filter: FILTER});
const [filteredMetadata] = await filtered.getMetadata();
check(filteredMetadata.filter === FILTER, `filter reads back: ${filteredMetadata.filter}`);
for (const kind of ['paid', 'created', 'refund-partial', 'shipped']) {
  await events.publishMessage({data: Buffer.from(kind), attributes: {kind}});
}
const kinds = [];
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('the filtered pull stalled')), 30_000);
  filtered.on('error', reject);
  filtered.on('message', message => {
    kinds.push(message.attributes.kind);
    message.ack();
    if (kinds.length === 2) {
      clearTimeout(timer);
      resolve();
    }
  });
});
await new Promise(resolve => setTimeout(resolve, 500));
await filtered.close();
kinds.sort();
check(kinds.join(',') === 'paid,refund-partial', `the filter took ${kinds}`);
await refusedWith(
  3,
  () => events.createSubscription('badly-filtered', {filter: 'attributes.kind = paid'}),
  'a malformed filter',
);
await filtered.delete();

// Collects `count` messages from `subscription` through `handle`, then closes it.
async function receive(subscription, count, handle) {
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stalled after ${got.length}`)), 60_000);
    subscription.on('error', reject);
    subscription.on('message', async message => {
      try {
        const keep = await handle(message);
        if (keep) {
          got.push(message);
        }
        if (got.length === count) {
          clearTimeout(timer);
          resolve();
        }
      } catch (e) {
        reject(e);
      }
    });
  });
  await subscription.close();
  return got;
}

// A dead-letter policy: nacked until its attempts are used up, a message moves to the
// dead-letter topic, counting deliveryAttempt on the way.
const [dead] = await pubsub.createTopic('dead-letters');
const [audit] = await dead.createSubscription('dead-letter-audit');
const [retried] = await events.createSubscription('retried', {
  deadLetterPolicy: {deadLetterTopic: dead.name, maxDeliveryAttempts: 5},
});
const poisonId = await events.publishMessage({data: Buffer.from('poison'), attributes: {kind: 'poison'}});
const attempts = [];
await receive(retried, 5, message => {
  attempts.push(message.deliveryAttempt);
  message.nack();
  return true;
});
check(attempts.join(',') === '1,2,3,4,5', `delivery attempts: ${attempts}`);
const [letter] = await receive(audit, 1, message => {
  message.ack();
  return true;
});
check(letter.id === poisonId && letter.data.toString() === 'poison', `the letter ${letter.id}`);
check(
  letter.attributes.CloudPubSubDeadLetterSourceDeliveryCount === '5',
  `dead-letter attributes ${JSON.stringify(letter.attributes)}`,
);
await retried.delete();
await audit.delete();
await dead.delete();

// Exactly-once delivery: ackWithResponse says the ack took effect.
const [once] = await events.createSubscription('exactly-once', {enableExactlyOnceDelivery: true});
const [onceMetadata] = await once.getMetadata();
check(onceMetadata.enableExactlyOnceDelivery === true, 'exactly-once reads back');
for (let i = 0; i < 3; i++) {
  await events.publishMessage({data: Buffer.from(`once-${i}`), attributes: {kind: 'once'}});
}
const responses = [];
await receive(once, 3, async message => {
  responses.push(await message.ackWithResponse());
  return true;
});
check(responses.every(r => r === 'SUCCESS'), `exactly-once acks: ${responses}`);
await once.delete();

// Seek back in time: what was acknowledged since comes again.
const [replayed] = await events.createSubscription('replayed');
// Topics keep their messages (7 days by default), so a seek may reach back past the
// subscription's creation, as a Pub/Sub topic with message retention allows: the time is
// taken after the earlier sections' messages. The client sends a Date's milliseconds as
// microseconds (`nanos: ms % 1000 * 1000`), so the time it seeks to is the start of the
// Date's second: the wait keeps that second clear of the earlier messages.
await new Promise(resolve => setTimeout(resolve, 1100));
const seekTo = new Date();
await new Promise(resolve => setTimeout(resolve, 20));
for (let i = 0; i < 3; i++) {
  await events.publishMessage({data: Buffer.from(`replay-${i}`), attributes: {kind: 'replay'}});
}
await receive(replayed, 3, message => {
  message.ack();
  return true;
});
await replayed.seek(seekTo);
const again = await receive(replayed, 3, message => {
  message.ack();
  return true;
});
check(
  again.map(m => m.data.toString()).sort().join(',') === 'replay-0,replay-1,replay-2',
  `after the seek to ${seekTo.getTime()}: ${again.map(m => `${m.data}@${m.publishTime.getTime()}`)}`,
);
await replayed.delete();
await events.delete();

await subscription.delete();
await topic.delete();
await refusedWith(NOT_FOUND, () => subscription.getMetadata(), 'a deleted subscription');
await pubsub.close();
console.log('every check passed');
