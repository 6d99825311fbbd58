"""No models: Conveyor's tables are created by its migration's SQL. The module is here so that
Django sends this app ``post_migrate`` (it skips apps without one), which empties the job table
after a ``flush`` (``apps.ConveyorConfig``)."""
