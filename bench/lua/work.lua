-- bench/lua/work.lua: the workloads the Lua benchmark mixes (train.lua, test.lua, heldout.lua
-- choose which ones and how much). Each workload exercises a different part of the Lua 5.4
-- interpreter (string library and pattern matcher, table code and sort, metatables and
-- closures, coroutines, the float paths, the garbage collector) and returns a number so that
-- the caller can print one checksum: a relinked interpreter must print the same one.
-- Deterministic: no clock, no random seed from the environment, no I/O but the final print.

local W = {}

-- A small linear congruential generator, so every run draws the same numbers.
local function lcg(seed)
  local s = seed
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    return s % n
  end
end

-- Strings: formatting, concatenation, patterns (find, gsub, gmatch), byte/char, rep, upper.
function W.strings(n)
  local rnd = lcg(7)
  local words = {}
  for i = 1, 200 do
    local t = {}
    for j = 1, 3 + rnd(8) do t[j] = string.char(97 + rnd(26)) end
    words[i] = table.concat(t)
  end
  local acc = 0
  for round = 1, n do
    local parts = {}
    for i = 1, 60 do
      parts[i] = string.format("%s=%d;%5.2f", words[(round * 7 + i) % 200 + 1], i * round, i / 7)
    end
    local line = table.concat(parts, " ")
    for k, v in line:gmatch("(%a+)=(%d+)") do acc = acc + #k + tonumber(v) % 13 end
    local up = line:upper():gsub("[AEIOU]", function(c) return c:lower() end)
    acc = acc + #up + (line:find("q", 1, true) or 0)
    local rev = line:sub(1, 40):reverse()
    for i = 1, #rev do acc = acc + rev:byte(i) % 3 end
    acc = acc + #(string.rep("ab", round % 17, ","))
  end
  return acc
end

-- Tables: array fill, hash keys, insert/remove, sort with a comparator, next/pairs walks.
function W.tables(n)
  local rnd = lcg(11)
  local acc = 0
  for round = 1, n do
    local a = {}
    for i = 1, 400 do a[i] = rnd(100000) end
    table.sort(a, function(x, y) return x > y end)
    acc = acc + a[1] - a[400]
    local h = {}
    for i = 1, 300 do h["k" .. (a[i] % 97)] = (h["k" .. (a[i] % 97)] or 0) + 1 end
    for _, v in pairs(h) do acc = acc + v end
    for i = 1, 50 do table.insert(a, 1 + rnd(#a), i) end
    for _ = 1, 50 do acc = acc + table.remove(a, 1 + rnd(#a)) % 7 end
    local moved = table.move(a, 1, 100, 1, {})
    acc = acc + #moved + select("#", table.unpack(moved, 1, 20))
  end
  return acc
end

-- Objects: metatables with __index inheritance, __add/__eq/__lt/__tostring, varargs, closures.
function W.objects(n)
  local Vec = {}
  Vec.__index = Vec
  function Vec.new(x, y) return setmetatable({ x = x, y = y }, Vec) end
  function Vec.__add(a, b) return Vec.new(a.x + b.x, a.y + b.y) end
  function Vec.__eq(a, b) return a.x == b.x and a.y == b.y end
  function Vec.__lt(a, b) return a:len2() < b:len2() end
  function Vec.__tostring(a) return "(" .. a.x .. "," .. a.y .. ")" end
  function Vec:len2() return self.x * self.x + self.y * self.y end
  local Named = setmetatable({}, { __index = Vec })
  Named.__index = Named
  Named.__add, Named.__lt = Vec.__add, Vec.__lt
  function Named.new(name, x, y)
    local o = Vec.new(x, y)
    o.name = name
    return setmetatable(o, Named)
  end
  function Named:label() return self.name .. tostring(Vec.new(self.x, self.y)) end

  local function counter()
    local c = 0
    return function(...)
      c = c + select("#", ...)
      return c
    end
  end
  local acc, count = 0, counter()
  for round = 1, n do
    local s = Vec.new(0, 0)
    for i = 1, 200 do
      local v = (i % 3 == 0) and Named.new("p" .. i, i, -i) or Vec.new(i % 5, round % 7)
      s = s + v
      if v < s then acc = acc + 1 end
      count(v, i, round)
    end
    acc = acc + s:len2() % 1000 + #Named.new("q", round, 1):label()
    if s == Vec.new(s.x, s.y) then acc = acc + 1 end
  end
  return acc + count()
end

-- Coroutines: a generator pipeline (producer -> filter -> consumer) and wrap.
function W.coroutines(n)
  local function gen(limit)
    return coroutine.wrap(function()
      for i = 1, limit do coroutine.yield(i) end
    end)
  end
  local function filter(src, p)
    return coroutine.wrap(function()
      for v in src do
        if p(v) then coroutine.yield(v) end
      end
    end)
  end
  local acc = 0
  for round = 1, n do
    for v in filter(gen(300), function(x) return x % (2 + round % 5) == 0 end) do acc = acc + v end
    local co = coroutine.create(function(a, b)
      local s = a + b
      while true do s = s + coroutine.yield(s) end
    end)
    local _, s = coroutine.resume(co, round, 1)
    for i = 1, 50 do _, s = coroutine.resume(co, i) end
    acc = acc + s + (coroutine.status(co) == "suspended" and 1 or 0)
  end
  return acc
end

-- A small interpreter: tokenizes, parses (recursive descent to an AST of tables) and evaluates
-- integer expressions with variables, then runs the same programs on a tiny stack machine.
function W.interp(n)
  local function tokenize(src)
    local toks = {}
    for num, id, op in src:gmatch("%s*(%d*)(%a*)([%+%-%*/%%%(%)=;]?)") do
      if num ~= "" then toks[#toks + 1] = { "num", tonumber(num) } end
      if id ~= "" then toks[#toks + 1] = { "id", id } end
      if op ~= "" then toks[#toks + 1] = { "op", op } end
    end
    return toks
  end
  local function parse(toks)
    local pos = 1
    local expr
    local function peek() return toks[pos] end
    local function atom()
      local t = toks[pos]
      pos = pos + 1
      if t[1] == "op" and t[2] == "(" then
        local e = expr()
        pos = pos + 1
        return e
      end
      return t
    end
    local function term()
      local l = atom()
      while peek() and peek()[1] == "op" and (peek()[2] == "*" or peek()[2] == "/" or peek()[2] == "%") do
        local op = toks[pos][2]
        pos = pos + 1
        l = { "bin", op, l, atom() }
      end
      return l
    end
    expr = function()
      local l = term()
      while peek() and peek()[1] == "op" and (peek()[2] == "+" or peek()[2] == "-") do
        local op = toks[pos][2]
        pos = pos + 1
        l = { "bin", op, l, term() }
      end
      return l
    end
    local stmts = {}
    while pos <= #toks do
      local name = toks[pos][2]
      pos = pos + 2 -- name '='
      stmts[#stmts + 1] = { name, expr() }
      pos = pos + 1 -- ';'
    end
    return stmts
  end
  local ops = {
    ["+"] = function(a, b) return a + b end,
    ["-"] = function(a, b) return a - b end,
    ["*"] = function(a, b) return a * b end,
    ["/"] = function(a, b) return b ~= 0 and a // b or 0 end,
    ["%"] = function(a, b) return b ~= 0 and a % b or 0 end,
  }
  local function eval(e, env)
    if e[1] == "num" then return e[2] end
    if e[1] == "id" then return env[e[2]] or 0 end
    return ops[e[2]](eval(e[3], env), eval(e[4], env))
  end
  local function compile(e, code)
    if e[1] == "num" then code[#code + 1] = { "push", e[2] }
    elseif e[1] == "id" then code[#code + 1] = { "load", e[2] }
    else
      compile(e[3], code)
      compile(e[4], code)
      code[#code + 1] = { "op", ops[e[2]] }
    end
    return code
  end
  local function run(code, env)
    local st, sp = {}, 0
    for i = 1, #code do
      local c = code[i]
      if c[1] == "push" then sp = sp + 1; st[sp] = c[2]
      elseif c[1] == "load" then sp = sp + 1; st[sp] = env[c[2]] or 0
      else st[sp - 1] = c[2](st[sp - 1], st[sp]); sp = sp - 1 end
    end
    return st[1]
  end
  local src = "a = 3 + 4 * 2; b = (a - 1) * (a + 1) % 97; c = b / 3 + a * (b - 7);"
    .. " d = (c % 11) * (a + b + c) - 5; e = d * d % 1009 + (a / 2);"
  local acc = 0
  for round = 1, n do
    local prog = parse(tokenize(src .. " f = e + " .. round .. ";"))
    local env = {}
    for _, s in ipairs(prog) do env[s[1]] = eval(s[2], env) end
    local env2 = {}
    for _, s in ipairs(prog) do env2[s[1]] = run(compile(s[2], {}), env2) end
    acc = acc + env.f + env2.f
  end
  return acc
end

-- JSON-like: serialize nested tables to text and parse them back.
function W.json(n)
  local function ser(v, out)
    local t = type(v)
    if t == "table" then
      if #v > 0 then
        out[#out + 1] = "["
        for i = 1, #v do
          if i > 1 then out[#out + 1] = "," end
          ser(v[i], out)
        end
        out[#out + 1] = "]"
      else
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = k end
        table.sort(keys)
        out[#out + 1] = "{"
        for i, k in ipairs(keys) do
          if i > 1 then out[#out + 1] = "," end
          out[#out + 1] = string.format("%q:", k)
          ser(v[k], out)
        end
        out[#out + 1] = "}"
      end
    elseif t == "string" then out[#out + 1] = string.format("%q", v)
    else out[#out + 1] = tostring(v) end
    return out
  end
  local function parse(s)
    local pos = 1
    local value
    local function ws() pos = s:find("[^ \n]", pos) or pos end
    value = function()
      ws()
      local c = s:sub(pos, pos)
      if c == "{" then
        local o = {}
        pos = pos + 1
        ws()
        if s:sub(pos, pos) == "}" then pos = pos + 1; return o end
        repeat
          ws()
          local k = s:match('^"([^"]*)"', pos)
          pos = pos + #k + 3
          o[k] = value()
          ws()
          local d = s:sub(pos, pos)
          pos = pos + 1
        until d == "}"
        return o
      elseif c == "[" then
        local a = {}
        pos = pos + 1
        repeat
          a[#a + 1] = value()
          ws()
          local d = s:sub(pos, pos)
          pos = pos + 1
        until d == "]"
        return a
      elseif c == '"' then
        local str = s:match('^"([^"]*)"', pos)
        pos = pos + #str + 2
        return str
      else
        local num = s:match("^-?[%d%.e]+", pos)
        pos = pos + #num
        return tonumber(num)
      end
    end
    return value()
  end
  local acc = 0
  for round = 1, n do
    local doc = { id = round, name = "item" .. round, tags = { "a", "b", "c" .. round }, nested = {} }
    for i = 1, 20 do doc.nested[i] = { x = i, y = i * round % 17, label = "n" .. i } end
    local text = table.concat(ser(doc, {}))
    local back = parse(text)
    acc = acc + #text + back.id + back.nested[20].y + #back.tags
  end
  return acc
end

-- Floats: the n-body simulation's inner loop (math library, float arithmetic).
function W.nbody(n)
  local bodies = {}
  for i = 1, 5 do
    bodies[i] = { x = i, y = i * 0.5, z = -i, vx = 0.01 * i, vy = 0, vz = -0.01 * i, m = 1 / i }
  end
  for _ = 1, n do
    for i = 1, 5 do
      local bi = bodies[i]
      for j = i + 1, 5 do
        local bj = bodies[j]
        local dx, dy, dz = bi.x - bj.x, bi.y - bj.y, bi.z - bj.z
        local d2 = dx * dx + dy * dy + dz * dz + 0.01
        local mag = 0.001 / (d2 * math.sqrt(d2))
        bi.vx, bi.vy, bi.vz = bi.vx - dx * bj.m * mag, bi.vy - dy * bj.m * mag, bi.vz - dz * bj.m * mag
        bj.vx, bj.vy, bj.vz = bj.vx + dx * bi.m * mag, bj.vy + dy * bi.m * mag, bj.vz + dz * bi.m * mag
      end
    end
    for i = 1, 5 do
      local b = bodies[i]
      b.x, b.y, b.z = b.x + 0.01 * b.vx, b.y + 0.01 * b.vy, b.z + 0.01 * b.vz
    end
  end
  local e = 0
  for i = 1, 5 do e = e + math.floor(math.abs(bodies[i].x) * 1000) end
  return e
end

-- Garbage: many short-lived tables and strings, with explicit collection steps.
function W.garbage(n)
  local acc = 0
  for round = 1, n do
    local keep = {}
    for i = 1, 300 do
      local t = { i, tostring(i), { i * 2 } }
      if i % 10 == 0 then keep[#keep + 1] = t end
    end
    acc = acc + #keep
    if round % 10 == 0 then collectgarbage("step", 100) end
  end
  return acc + math.floor(collectgarbage("count") > 0 and 1 or 0)
end

-- run(mix): mix is a list of {workload name, size}; prints one checksum line.
function W.run(mix)
  local sum = 0
  for _, m in ipairs(mix) do
    local r = W[m[1]](m[2])
    sum = (sum + r) % 1000000007
  end
  print(string.format("checksum %d", sum))
end

return W
