-- A journal row's saga_id prefix of the primary key finds a saga's entries
-- of a phase as well: the extra index only cost every insert and every
-- leaf the sequencer gives.
DROP INDEX journal_phase;
