-- The time in t.at_text (an errors entry's "at": ISO 8601, with or without a UTC offset) as naive
-- UTC, or NULL when it is not one. Built from its parts once the pattern has checked them all, so
-- that no value another client wrote (2030-02-31, 25:00, 'soon') fails the statement, as a cast
-- would. After the seconds come the fraction (digits and a point) and then the zone.
CASE WHEN t.at_text ~ '^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3])(:?[0-5][0-9])?)?$'
THEN (
    SELECT make_date(substr(p.at, 1, 4)::int, substr(p.at, 6, 2)::int, 1)
        + (substr(p.at, 9, 2)::int - 1)
        + make_interval(
            hours => substr(p.at, 12, 2)::int,
            mins => substr(p.at, 15, 2)::int,
            secs => substr(p.at, 18, 2)::int + ('0' || left(p.rest, length(p.rest) - length(p.zone)))::float8
        )
        - CASE WHEN p.zone IN ('', 'Z', 'z') THEN interval '0' ELSE
            (CASE WHEN left(p.zone, 1) = '-' THEN -1 ELSE 1 END) * make_interval(
                hours => substr(p.zone, 2, 2)::int,
                mins => coalesce(nullif(replace(substr(p.zone, 4), ':', ''), '')::int, 0)
            )
        END
    FROM (
        SELECT t.at_text AS at, substr(t.at_text, 20) AS rest, ltrim(substr(t.at_text, 20), '.0123456789') AS zone
    ) AS p
) END
