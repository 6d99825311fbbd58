-- The job a signal is for, locked until its inbox is written (engine/mysql/relay.py decides the rest).
SELECT state, queue, meta FROM {prefix}.oban_jobs WHERE id = %(id)s FOR UPDATE;
