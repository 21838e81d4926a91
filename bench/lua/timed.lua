-- bench/lua/timed.lua: the workload `sediment stat` times (bench/run's TIMED): test.lua's mix
-- run ten times over, about 0.35 s natively, as test.lua's 35 ms is too short to time well on
-- a shared machine (the same reason SQLite times `--size 50` rather than `--size 5`). See
-- work.lua.
local W = dofile((arg[0]:match("(.*/)") or "./") .. "work.lua")
for _ = 1, 10 do
  W.run({ { "interp", 100 }, { "strings", 50 }, { "json", 50 }, { "tables", 15 }, { "objects", 25 },
    { "coroutines", 37 } })
end
