-- A fetch rewrites every row it leases (visible_at, lease_token, read_count, consumer), and
-- none of those columns is indexed: when the row's page has room for the new version, the
-- update is HOT and adds no entry to any index. With full pages each lease instead adds an
-- entry to every index, twice the index churn and WAL of the row's life, and twice the dead
-- entries a fetch skips at the head of its queue until a vacuum. A fetch leases a run of
-- consecutive rows, whole pages of them, so each page keeps half its space for their new
-- versions; pages written before this keep their old fill.
ALTER TABLE ferry.messages SET (fillfactor = 50);
