CREATE TABLE emp(id INTEGER PRIMARY KEY, dept TEXT, salary REAL, name TEXT);
CREATE TABLE dept(name TEXT PRIMARY KEY, city TEXT) WITHOUT ROWID;
INSERT INTO dept VALUES ('eng','berlin'),('ops','paris'),('sales','rome'),('hr','oslo');
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<3000)
INSERT INTO emp SELECT i, CASE i%4 WHEN 0 THEN 'eng' WHEN 1 THEN 'ops' WHEN 2 THEN 'sales' ELSE 'hr' END,
  1000.0 + (i*37)%5000, 'name' || hex(i*13) || i FROM n;
SELECT d.city, count(*), avg(e.salary), group_concat(substr(e.name,1,5), ',') IS NOT NULL
  FROM emp e JOIN dept d ON e.dept = d.name GROUP BY d.city ORDER BY d.city;
SELECT dept, name, salary, rank() OVER (PARTITION BY dept ORDER BY salary DESC) AS r FROM emp ORDER BY r, id LIMIT 3;
CREATE INDEX es ON emp(salary);
SELECT count(*) FROM emp WHERE salary > 3000 AND name GLOB 'name*7';
UPDATE emp SET salary = salary * 1.1 WHERE dept = 'eng';
SELECT round(sum(salary), 2) FROM emp;
SELECT replace(trim(name), 'name', 'N'), instr(name, '9') FROM emp WHERE id % 500 = 0;
