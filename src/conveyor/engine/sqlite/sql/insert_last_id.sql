-- The highest id ever given in oban_jobs: after an insert of n jobs starting at id f it is
-- f + n - 1 exactly when the jobs took consecutive ids (always, unless a trigger inserted more).
SELECT seq FROM sqlite_sequence WHERE name = 'oban_jobs';
