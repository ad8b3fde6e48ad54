-- A journal row's saga_id prefix of the primary key finds a saga's entries
-- of a phase as well: the extra index only cost every insert and every
-- leaf the sequencer gives.
DROP INDEX journal_phase;

-- An entry is written with no leaf: the index of leaves need not hold it
-- until the sequencer gives it one.
DROP INDEX journal_leaf;
CREATE UNIQUE INDEX journal_leaf ON journal (leaf) WHERE leaf IS NOT NULL;

-- Room on each page lets an update of a saga's row that changes no indexed
-- column (its head, most of the time) stay on the page (a HOT update),
-- without touching the indexes.
ALTER TABLE sagas SET (fillfactor = 70);
