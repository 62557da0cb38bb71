-- speakd: lowers other audio while speakd speaks, for WirePlumber 0.4 (Debian 12, Ubuntu 24.04).
--
-- PulseAudio does this with module-role-ducking; pipewire-pulse has no such module, and
-- WirePlumber 0.4 ducks only through its experimental role endpoints, which send every stream
-- to the default sink (a named output's chosen sink is ignored) and leave capture streams
-- unlinked. This script instead sets the master volume of each stream of a ducked role to
-- `level` for as long as a stream of a trigger role exists, and back to 1.0 when none does.
-- speakd's stream carries media.role=announcement and is closed 0.5 s after its last
-- announcement, so the ducking ends then.
--
-- Install: this file in ~/.config/wireplumber/scripts/ (or /etc/wireplumber/scripts/), and
-- ../policy.lua.d/60-speakd-ducking.lua, which loads it, in the matching policy.lua.d/.
local config = ... or {}

-- pipewire-pulse turns PulseAudio's role names into PipeWire's ("music" into "Music",
-- "video" into "Movie") and passes others on as they are ("announcement"): roles are
-- compared without case.
local function set_of(list)
  local set = {}
  for _, role in ipairs(list) do set[string.lower(role)] = true end
  return set
end
local triggers = set_of(config["trigger-roles"] or { "announcement" })
local ducked = set_of(config["ducking-roles"] or { "music", "movie", "game" })
local level = config["level"] or 0.2

local function role_of(node)
  return string.lower(node.properties["media.role"] or "")
end

-- The master "volume" of a stream's node: clients and mixers (pactl set-sink-input-volume,
-- pavucontrol) set its channel volumes instead, so this one is the ducking's alone.
local function set_volume(node, volume)
  node:set_param("Props", Pod.Object {
    "Spa:Pod:Object:Param:Props", "Props", volume = volume,
  })
end

local ducking = false

local function update(om)
  local trigger = false
  for node in om:iterate() do
    if triggers[role_of(node)] then trigger = true end
  end
  -- Every stream of a ducked role is set, so one that appears while ducking is ducked too.
  for node in om:iterate() do
    if ducked[role_of(node)] then set_volume(node, trigger and level or 1.0) end
  end
  if trigger ~= ducking then
    Log.info("speakd-ducking: " .. (trigger and "ducking" or "restored"))
    ducking = trigger
  end
end

streams_om = ObjectManager {
  Interest {
    type = "node",
    Constraint { "media.class", "=", "Stream/Output/Audio", type = "pw-global" },
  },
}
streams_om:connect("objects-changed", update)
streams_om:activate()
