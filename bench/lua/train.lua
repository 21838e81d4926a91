-- bench/lua/train.lua: the Lua benchmark's training mix (the profile is recorded on this).
-- String, table, object and interpreter work; see work.lua.
local W = dofile((arg[0]:match("(.*/)") or "./") .. "work.lua")
W.run({ { "strings", 100 }, { "tables", 100 }, { "objects", 133 }, { "interp", 500 }, { "json", 100 } })
