CREATE TABLE t(a INTEGER PRIMARY KEY, b INTEGER, c TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<4000)
INSERT INTO t SELECT i, (i*7919)%1000, printf('row-%d-%x', i, i*31) FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(b), max(length(c)) FROM t;
SELECT b, count(*) FROM t WHERE b BETWEEN 100 AND 200 GROUP BY b ORDER BY 2 DESC LIMIT 5;
UPDATE t SET c = upper(c) WHERE a % 3 = 0;
DELETE FROM t WHERE b > 900;
SELECT count(*) FROM t AS x JOIN t AS y ON x.b = y.b AND x.a < y.a WHERE x.a < 600;
SELECT sum(length(c)) FROM t WHERE c LIKE 'ROW-1%';
