-- bench/lua/heldout.lua: the Lua benchmark's held-out mix: workloads the training run never
-- ran (coroutines, floats, garbage collection), with a little JSON. See work.lua.
local W = dofile((arg[0]:match("(.*/)") or "./") .. "work.lua")
W.run({ { "coroutines", 75 }, { "nbody", 5000 }, { "garbage", 75 }, { "json", 12 } })
