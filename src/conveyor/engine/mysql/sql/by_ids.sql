-- The index hint of a cancel's, retry's or delete's targets when the filter names ids
-- (filter_ids.sql): read by the primary key only, whatever the table's size (ack_targets.sql says
-- why). Without ids, the filter's other parts choose the index.
FORCE INDEX (PRIMARY)
