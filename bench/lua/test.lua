-- bench/lua/test.lua: the Lua benchmark's measured mix: the training workloads in other
-- proportions, plus coroutines that training never ran. See work.lua.
local W = dofile((arg[0]:match("(.*/)") or "./") .. "work.lua")
W.run({ { "interp", 100 }, { "strings", 50 }, { "json", 50 }, { "tables", 15 }, { "objects", 25 },
  { "coroutines", 37 } })
