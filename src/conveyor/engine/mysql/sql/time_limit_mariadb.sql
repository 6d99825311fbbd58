-- MariaDB's bound on the time of the statement that follows (seconds): error 1969 once it is up.
SET STATEMENT max_statement_time = {seconds} FOR
