-- The PostgreSQL transport's tables, in the `ferry` schema. Run by `sqlx::migrate!` on
-- connect; the migrator's advisory lock keeps concurrent connects from racing.

-- A topic is only a name: publishing to it copies each message to its subscriptions.
CREATE TABLE ferry.topics (
    name text PRIMARY KEY,
    partitions integer NOT NULL
);

-- Queues and subscriptions share one namespace, as on the Ferry broker. `settings` is the
-- whole declaration, so redeclaring with other settings is told apart from a repeat.
-- The foreign key (RESTRICT) keeps a topic from being deleted under its subscriptions.
CREATE TABLE ferry.queues (
    name text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('queue', 'subscription')),
    topic text REFERENCES ferry.topics (name),
    settings jsonb NOT NULL,
    CHECK ((kind = 'subscription') = (topic IS NOT NULL))
);
CREATE INDEX queues_by_topic ON ferry.queues (topic) WHERE topic IS NOT NULL;

-- One token per lease: a settlement names the token it was handed, so one made after the
-- message went to another consumer matches no row.
CREATE SEQUENCE ferry.lease_tokens;

-- Every message of every queue, subscription and dead-letter queue (`<name>.dlq`). A row
-- is deliverable when visible_at has passed; a fetch moves visible_at to the end of the
-- lease, so an unsettled delivery comes back by itself.
CREATE TABLE ferry.messages (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue text NOT NULL,
    id text NOT NULL,
    key bytea,
    headers jsonb NOT NULL,
    payload bytea NOT NULL,
    priority smallint NOT NULL,
    published_at timestamptz NOT NULL,
    visible_at timestamptz NOT NULL,
    expires_at timestamptz,
    lease_token bigint,
    -- Deliveries so far: the attempt number of the latest one.
    read_count integer NOT NULL DEFAULT 0,
    -- The consumer that took the latest delivery, and the failures so far, for the
    -- dead-letter metadata.
    consumer text,
    last_error text,
    first_failure_at timestamptz,
    last_failure_at timestamptz
);
CREATE INDEX messages_next ON ferry.messages (queue, priority DESC, seq);
CREATE INDEX messages_by_key ON ferry.messages (queue, key, seq) WHERE key IS NOT NULL;
CREATE INDEX messages_expiring ON ferry.messages (queue, expires_at)
    WHERE expires_at IS NOT NULL;

-- Dedup ids seen within a queue's window; a row past expires_at is replaced by the next
-- publish of its id, and cleared by the publishes to its queue.
CREATE TABLE ferry.dedup (
    queue text NOT NULL,
    dedup_id text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (queue, dedup_id)
);
CREATE INDEX dedup_expiring ON ferry.dedup (queue, expires_at);
