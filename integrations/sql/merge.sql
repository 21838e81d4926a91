-- `sediment merge` as one SQL query over Sediment's Parquet table (schema versions 1 and 2,
-- docs/design/parquet.md), for DuckDB and Apache Spark (runners: duckdb_merge.py,
-- spark_merge.py; guide: docs/guide/fleet.md).
--
-- Input: a table or view named `profiles` with the columns of schema version 2 (the runners
-- add null `offset` and `sample_weight` columns to version-1 tables; any number of binaries and
-- submissions). Output: rows of schema version 2, one merged profile per binary
-- (its build-id, else the base name of its path), so `sediment import --format parquet` of
-- the result gives, per binary, the profile `sediment merge` makes of that binary's
-- submissions with the same options (see docs/design/merging.md):
--
--   1. effective weight e of a submission: its `weight` (1 when null), then
--      --per-submitter      e = W / (sum of W over its submitter's submissions; 0 when 0)
--      --half-life DAYS     e = e * 0.5 ^ (max(now - recorded_at, 0) / (DAYS * 86400)),
--                           now = --now, else the newest recorded_at of the binary
--      --cap-per-submitter  e = e * (C / T) when the submitter's e sum to T > C
--      (sums over a submitter add the values in ascending order: sorted_sum below)
--   2. each submission normalised: factor = e * 1e9 / (its total self weight, else its total
--      call weight; factor 0 when both are 0), in f64;
--   3. each value v (self weight, call weight, sample weight, meta total) becomes the fixed-point term
--      round(v * factor * 2^32), half away from zero (32 fraction bits), summed exactly;
--   4. each sum rounded once, half up, to an integer: (s + 2^31) >> 32, saturating at 2^64-1.
--      Calls and samples that round to 0 are dropped; functions stay with weight 0; size is the
--      largest; total is at least the sum of the self weights. Samples (schema version 2) are
--      summed per function and offset.
--
-- Exactness without 128-bit integers: DECIMAL(38,0) holds the fixed-point sums in both
-- engines; every conversion between DOUBLE and DECIMAL goes through BIGINTs of at most 2^53
-- (a double integer r <= 2^96 is split into floor(r / 2^48) and the rest, both exact), and
-- the final shift is a division by 2^32 computed in DOUBLE and corrected by the exact
-- remainder. Only +, -, *, FLOOR of values below 2^53, CAST, comparisons and POWER are used.
--
-- Parameters, replaced as text by the runners before the query runs:
--   ${per_submitter}   TRUE or FALSE
--   ${half_life_days}  a number, or NULL         ${half_life_text}  the same as Rust prints it ('14'), or NULL
--   ${now}             an integer, or NULL
--   ${cap}             a number, or NULL         ${cap_text}        the same as Rust prints it, or NULL
-- and each engine defines sorted_sum(ARRAY<DOUBLE>) -> DOUBLE: the values in ascending order
-- added one by one from 0 (as Rust sums them). The one engine-specific line.
--
-- Not checked here (sediment merge refuses them unless --force): different architectures
-- within one build-id (the result has no arch, as with --force).
--
-- `offset` is a keyword of both engines: it is always written qualified (`r.offset`).
WITH
subs AS (
  SELECT profile AS id, binary_name, build_id, arch, event, submitter, recorded_at,
         COALESCE(CAST(weight AS DOUBLE), CAST(1 AS DOUBLE)) AS w0,
         COALESCE('b ' || build_id, 'n ' || regexp_extract(binary_name, '[^/]*$', 0)) AS g,
         COALESCE('s ' || submitter, 'i ' || profile) AS who
  FROM profiles
  WHERE kind = 'profile'
),
-- 1a. per submitter, on the undecayed weights
w1 AS (
  SELECT subs.*,
         CASE WHEN NOT ${per_submitter} THEN w0
              WHEN sorted_sum(array_agg(w0) OVER (PARTITION BY g, who)) > CAST(0 AS DOUBLE)
                THEN w0 / sorted_sum(array_agg(w0) OVER (PARTITION BY g, who))
              ELSE CAST(0 AS DOUBLE) END AS w1,
         COALESCE(CAST(${now} AS BIGINT), MAX(recorded_at) OVER (PARTITION BY g)) AS now_g
  FROM subs
),
-- 1b. decay by age
w2 AS (
  SELECT w1.*,
         CASE WHEN CAST(${half_life_days} AS DOUBLE) IS NOT NULL AND recorded_at IS NOT NULL
                   AND now_g IS NOT NULL
                THEN w1 * POWER(CAST(0.5 AS DOUBLE),
                                CAST(GREATEST(now_g - recorded_at, 0) AS DOUBLE)
                                / (CAST(${half_life_days} AS DOUBLE) * CAST(86400 AS DOUBLE)))
              ELSE w1 END AS w2
  FROM w1
),
-- 1c. cap per submitter
w3 AS (
  SELECT w2.*,
         CASE WHEN CAST(${cap} AS DOUBLE) IS NOT NULL
                   AND sorted_sum(array_agg(w2) OVER (PARTITION BY g, who)) > CAST(${cap} AS DOUBLE)
                THEN w2 * (CAST(${cap} AS DOUBLE) / sorted_sum(array_agg(w2) OVER (PARTITION BY g, who)))
              ELSE w2 END AS w
  FROM w2
),
-- 2. normalisation factor of each submission
sums AS (
  SELECT profile AS id,
         SUM(CASE WHEN kind = 'function' THEN CAST(self_weight AS DECIMAL(38,0)) END) AS self_total,
         SUM(CASE WHEN kind = 'call' THEN CAST(call_weight AS DECIMAL(38,0)) END) AS call_total
  FROM profiles
  GROUP BY profile
),
factors AS (
  SELECT w3.id, w3.g,
         CASE WHEN COALESCE(s.self_total, 0) > 0
                THEN w3.w * CAST(1000000000 AS DOUBLE) / CAST(s.self_total AS DOUBLE)
              WHEN COALESCE(s.call_total, 0) > 0
                THEN w3.w * CAST(1000000000 AS DOUBLE) / CAST(s.call_total AS DOUBLE)
              ELSE CAST(0 AS DOUBLE) END AS factor
  FROM w3 JOIN sums s ON s.id = w3.id
),
-- 3. fixed-point terms: x = v * factor * 2^32 (clamped at 2^96, where every result
--    saturates anyway), rounded half away from zero, as an exact DECIMAL
terms AS (
  SELECT f.g, r.kind, r.name, r.file, r.callee_name, r.callee_file, r.size,
         CASE WHEN r.kind = 'sample' THEN CAST(r.offset AS DECIMAL(20,0)) END AS sample_offset,
         LEAST(CAST(CASE r.kind WHEN 'function' THEN r.self_weight
                                WHEN 'call' THEN r.call_weight
                                WHEN 'sample' THEN r.sample_weight
                                ELSE r.total END AS DOUBLE)
               * f.factor * CAST(4294967296 AS DOUBLE),
               POWER(CAST(2 AS DOUBLE), 96)) AS x
  FROM profiles r JOIN factors f ON f.id = r.profile
  WHERE r.kind IN ('profile', 'function', 'call', 'sample')
),
rounded_terms AS (
  SELECT terms.*,
         CASE WHEN x >= CAST(4503599627370496 AS DOUBLE) THEN x
              ELSE CAST(FLOOR(x) AS DOUBLE)
                   + CASE WHEN x - CAST(FLOOR(x) AS DOUBLE) >= CAST(0.5 AS DOUBLE)
                          THEN CAST(1 AS DOUBLE) ELSE CAST(0 AS DOUBLE) END END AS r
  FROM terms
),
fixed AS (
  SELECT g, kind, name, file, callee_name, callee_file, size, sample_offset,
         CAST(FLOOR(r / CAST(281474976710656 AS DOUBLE)) AS DECIMAL(38,0))
           * CAST(281474976710656 AS DECIMAL(38,0))
         + CAST(CAST(r - CAST(FLOOR(r / CAST(281474976710656 AS DOUBLE)) AS DOUBLE)
                         * CAST(281474976710656 AS DOUBLE) AS BIGINT) AS DECIMAL(38,0)) AS v
  FROM rounded_terms
),
-- exact sums, plus the half of step 4
summed AS (
  SELECT g, kind, name, file, callee_name, callee_file, sample_offset, MAX(size) AS size,
         SUM(v) + CAST(2147483648 AS DECIMAL(38,0)) AS s
  FROM fixed
  GROUP BY g, kind, name, file, callee_name, callee_file, sample_offset
),
-- 4. s >> 32: an approximate quotient qd in DOUBLE, made exact (qa), then corrected by the
--    remainder s - qa * 2^32, which is small enough to be exact in DOUBLE
approx AS (
  SELECT summed.*,
         CASE WHEN CAST(s AS DOUBLE) / CAST(4294967296 AS DOUBLE) >= CAST(4503599627370496 AS DOUBLE)
                THEN CAST(s AS DOUBLE) / CAST(4294967296 AS DOUBLE)
              ELSE CAST(FLOOR(CAST(s AS DOUBLE) / CAST(4294967296 AS DOUBLE)) AS DOUBLE) END AS qd
  FROM summed
),
exact_q AS (
  SELECT approx.*,
         CAST(FLOOR(qd / CAST(4294967296 AS DOUBLE)) AS DECIMAL(38,0)) * CAST(4294967296 AS DECIMAL(38,0))
         + CAST(CAST(qd - CAST(FLOOR(qd / CAST(4294967296 AS DOUBLE)) AS DOUBLE)
                         * CAST(4294967296 AS DOUBLE) AS BIGINT) AS DECIMAL(38,0)) AS qa
  FROM approx
),
rounded AS (
  SELECT g, kind, name, file, callee_name, callee_file, sample_offset, size,
         CASE WHEN s >= CAST('79228162514264337593543950336' AS DECIMAL(38,0))
                THEN CAST('18446744073709551615' AS DECIMAL(38,0))
              ELSE qa + CAST(FLOOR(CAST(s - qa * CAST(4294967296 AS DECIMAL(38,0)) AS DOUBLE)
                                   / CAST(4294967296 AS DOUBLE)) AS DECIMAL(38,0)) END AS w
  FROM exact_q
),
totals AS (
  SELECT t.g,
         GREATEST(t.w, LEAST(COALESCE(f.sw, CAST(0 AS DECIMAL(38,0))),
                             CAST('18446744073709551615' AS DECIMAL(38,0)))) AS total
  FROM rounded t
  LEFT JOIN (SELECT g, SUM(w) AS sw FROM rounded WHERE kind = 'function' GROUP BY g) f
    ON f.g = t.g
  WHERE t.kind = 'profile'
),
-- the merged metadata (docs/design/merging.md)
gmeta AS (
  SELECT g, MIN(binary_name) AS binary_name, MIN(build_id) AS build_id,
         CASE WHEN COUNT(DISTINCT arch) = 1 THEN MIN(arch) END AS arch,
         CASE WHEN COUNT(DISTINCT COALESCE(event, '')) = 1 AND MIN(COALESCE(event, '')) <> ''
                THEN MIN(event) END AS event,
         CASE WHEN COUNT(submitter) = COUNT(*) AND COUNT(DISTINCT submitter) = 1
                THEN MIN(submitter) END AS submitter,
         CASE WHEN COUNT(recorded_at) = COUNT(*) THEN MAX(recorded_at) END AS recorded_at,
         COUNT(*) AS inputs, COUNT(DISTINCT who) AS submitters, MAX(now_g) AS now_g
  FROM w3
  GROUP BY g
),
head AS (
  SELECT m.g, 'merge ' || m.g AS profile, m.binary_name, m.build_id, m.arch, m.event,
         CAST(t.total AS DECIMAL(20,0)) AS total,
         'merge-inputs ' || CAST(m.inputs AS STRING) || chr(10) || 'merge-scale 1000000000'
         || CASE WHEN ${per_submitter} OR ${cap_text} IS NOT NULL
                   THEN chr(10) || 'merge-submitters ' || CAST(m.submitters AS STRING) ELSE '' END
         || CASE WHEN ${half_life_text} IS NOT NULL
                   THEN chr(10) || 'merge-half-life-days ' || ${half_life_text}
                        || CASE WHEN m.now_g IS NOT NULL
                                  THEN chr(10) || 'merge-now ' || CAST(m.now_g AS STRING) ELSE '' END
                 ELSE '' END
         || CASE WHEN ${cap_text} IS NOT NULL
                   THEN chr(10) || 'merge-cap-per-submitter ' || ${cap_text} ELSE '' END AS meta,
         m.submitter, m.recorded_at
  FROM gmeta m JOIN totals t ON t.g = m.g
),
out_rows AS (
  SELECT h.profile, 'profile' AS kind, 0 AS row_rank, h.binary_name, h.build_id, h.arch, 'merge' AS source,
         h.event, h.total, h.meta, h.submitter, h.recorded_at, CAST(1 AS DOUBLE) AS weight,
         CAST(NULL AS STRING) AS name, CAST(NULL AS STRING) AS file,
         CAST(NULL AS DECIMAL(20,0)) AS size, CAST(NULL AS DECIMAL(20,0)) AS self_weight,
         CAST(NULL AS STRING) AS callee_name, CAST(NULL AS STRING) AS callee_file,
         CAST(NULL AS DECIMAL(20,0)) AS call_weight,
         CAST(NULL AS DECIMAL(20,0)) AS sample_offset, CAST(NULL AS DECIMAL(20,0)) AS sample_weight
  FROM head h
  UNION ALL
  SELECT h.profile, 'function', 1, h.binary_name, h.build_id, h.arch, 'merge', h.event, h.total,
         h.meta, h.submitter, h.recorded_at, CAST(1 AS DOUBLE), r.name, r.file,
         CAST(r.size AS DECIMAL(20,0)), CAST(r.w AS DECIMAL(20,0)),
         CAST(NULL AS STRING), CAST(NULL AS STRING), CAST(NULL AS DECIMAL(20,0)),
         CAST(NULL AS DECIMAL(20,0)), CAST(NULL AS DECIMAL(20,0))
  FROM rounded r JOIN head h ON h.g = r.g
  WHERE r.kind = 'function'
  UNION ALL
  SELECT h.profile, 'call', 2, h.binary_name, h.build_id, h.arch, 'merge', h.event, h.total,
         h.meta, h.submitter, h.recorded_at, CAST(1 AS DOUBLE), r.name, r.file,
         CAST(NULL AS DECIMAL(20,0)), CAST(NULL AS DECIMAL(20,0)),
         r.callee_name, r.callee_file, CAST(r.w AS DECIMAL(20,0)),
         CAST(NULL AS DECIMAL(20,0)), CAST(NULL AS DECIMAL(20,0))
  FROM rounded r JOIN head h ON h.g = r.g
  WHERE r.kind = 'call' AND r.w > 0
  UNION ALL
  SELECT h.profile, 'sample', 3, h.binary_name, h.build_id, h.arch, 'merge', h.event, h.total,
         h.meta, h.submitter, h.recorded_at, CAST(1 AS DOUBLE), r.name, r.file,
         CAST(NULL AS DECIMAL(20,0)), CAST(NULL AS DECIMAL(20,0)),
         CAST(NULL AS STRING), CAST(NULL AS STRING), CAST(NULL AS DECIMAL(20,0)),
         r.sample_offset, CAST(r.w AS DECIMAL(20,0))
  FROM rounded r JOIN head h ON h.g = r.g
  WHERE r.kind = 'sample' AND r.w > 0
)
SELECT o.profile, o.kind, o.binary_name, o.build_id, o.arch, o.source, o.event, o.total, o.meta,
       o.submitter, o.recorded_at, o.weight, o.name, o.file, o.size, o.self_weight, o.callee_name,
       o.callee_file, o.call_weight, o.sample_offset AS offset, o.sample_weight
FROM out_rows o
ORDER BY o.profile, o.row_rank, o.name, o.file, o.callee_name, o.callee_file, o.sample_offset
