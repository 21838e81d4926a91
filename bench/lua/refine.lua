-- bench/lua/refine.lua: the training mix of train.lua at a tenth of its size, the run that
-- `sediment tune` records and replays (bench/run step 4r). See work.lua.
local W = dofile((arg[0]:match("(.*/)") or "./") .. "work.lua")
W.run({ { "strings", 10 }, { "tables", 10 }, { "objects", 13 }, { "interp", 50 }, { "json", 10 } })
