SELECT @@innodb_autoinc_lock_mode;
