(worker = :worker_suffix OR substr(worker, -length(:worker_suffix) - 1) = '.' || :worker_suffix)
